"""Decoding under a JSON schema on the bundled Qwen2.5-Coder pair, on both runtimes: greedy
speculative output equals greedy plain output under the same schema, token for token, for every
drafter the pair runs, and the answer is valid JSON for its schema.

    flock /work/locks/heavy.lock python3.11 -m pytest tests/test_grammar_bundled.py -m bundled
"""

from __future__ import annotations

import pytest

from specviz import engine
from specviz.choices import LLAMACPP, TORCH
from specviz.settings import GenerationSettings
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts

pytestmark = pytest.mark.bundled

NEW_TOKENS = 48
DRAFTERS = {TORCH: ["model", "tree", "lookup", "suffix", "lookahead", "early-exit"]}
DRAFTERS[LLAMACPP] = [d for d in DRAFTERS[TORCH] if d != "early-exit"]  # early exit runs torch modules


@pytest.fixture(scope="module", params=[TORCH, LLAMACPP])
def runtime(request):
    from specviz.lm import load_pair

    # fp32 on torch: only there does a multi-token pass round like a one-token pass
    options = {"dtype": "float32"} if request.param == TORCH else {}
    return request.param, load_pair("qwen-coder", runtime=request.param, **options)


def test_greedy_constrained_speculative_equals_constrained_plain_for_every_drafter(runtime):
    name, pair = runtime
    task = next(p for p in load_prompts(DEFAULT_PROMPTS) if p.id == "json-contact")
    base = dict(max_new_tokens=NEW_TOKENS, output_format=task.output_format, output_spec=task.output_spec)
    plain = engine.run(pair, task.prompt, GenerationSettings(mode="plain", **base))
    assert plain.text.startswith('{"full_name": "')  # the schema's first key, forced
    for drafter in DRAFTERS[name]:
        spec = engine.run(pair, task.prompt, GenerationSettings(drafter=drafter, policy="fixed", k=4, **base))
        assert spec.token_ids == plain.token_ids, (name, drafter, spec.text, plain.text)
        assert spec.summary.forced > 0 and spec.summary.forced_accepted > 0


def test_a_whole_answer_is_valid_json_for_its_schema(runtime):
    _, pair = runtime
    task = next(p for p in load_prompts(DEFAULT_PROMPTS) if p.id == "json-bug")
    s = GenerationSettings(max_new_tokens=256, output_format=task.output_format, output_spec=task.output_spec)
    trace = engine.run(pair, task.prompt, s)
    assert trace.summary.stop_reason == "eos" and trace.summary.format_check == "valid", trace.text
