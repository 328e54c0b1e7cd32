"""The engine on the bundled Qwen2.5-Coder pair (0.5B drafts for 1.5B, the target in fp32).

Greedy speculative decoding must give the target's own greedy output token for token:
specviz's plain loop, its speculative loop and transformers' `generate` agree.
Run with `flock /tmp/specviz-heavy.lock python -m pytest tests/test_engine_bundled.py -m bundled`.
"""

import pytest
import torch

from specviz import engine
from specviz.lm.prompt import encode_prompt, stop_ids
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.bundled

PROMPTS = ["Write a function that reverses a string", "Explain in two sentences why the sky is blue."]
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def pair():
    from specviz.lm import load_pair

    # fp32: only there does a multi-token verify pass round like a one-token pass, so greedy
    # outputs can be compared token for token
    return load_pair("qwen-coder", dtype="float32")


@pytest.fixture(scope="module")
def plain_run(pair):
    """specviz's plain greedy run of each prompt, made once for the tests that compare with it."""
    runs = {}

    def of(prompt):
        if prompt not in runs:
            runs[prompt] = engine.run(pair, prompt, GenerationSettings(max_new_tokens=NEW_TOKENS, mode="plain"))
        return runs[prompt]

    return of


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculative_equals_plain_and_transformers(pair, plain_run, prompt):
    base = GenerationSettings(max_new_tokens=NEW_TOKENS)
    plain = plain_run(prompt)
    spec = engine.run(pair, prompt, GenerationSettings(max_new_tokens=NEW_TOKENS, k=4))

    ids = torch.tensor([encode_prompt(pair, prompt, base)], device=pair.device)
    with torch.inference_mode():
        out = pair.target.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=sorted(stop_ids(pair)),
            pad_token_id=pair.tokenizer.pad_token_id,
        )
    reference = out[0, ids.shape[1] :].tolist()

    assert plain.token_ids == reference
    assert spec.token_ids == reference, _divergence(spec, reference)
    assert spec.text == plain.text == pair.tokenizer.decode(reference, skip_special_tokens=True)
    assert spec.summary.rounds < spec.summary.new_tokens  # the draft did help
    assert 0 < spec.summary.acceptance_rate <= 1


@pytest.mark.parametrize("drafter", ["lookup", "early-exit"])
def test_self_drafting_greedy_equals_plain(pair, plain_run, drafter):
    prompt = PROMPTS[0]
    # greedy plain decoding of 16 tokens is the first 16 of its 32-token run
    reference = plain_run(prompt).token_ids[:16]
    spec = engine.run(pair, prompt, GenerationSettings(max_new_tokens=16, k=4, drafter=drafter, policy="cost-aware"))
    assert len(reference) == 16 and spec.token_ids == reference, _divergence(spec, reference)


def _divergence(trace, reference) -> str:
    """Where the outputs part, with the target's top-2 logit gap there (a near-tie in a
    multi-token pass rounds differently from a one-token pass)."""
    got = trace.token_ids
    i = next((j for j, (a, b) in enumerate(zip(got, reference)) if a != b), min(len(got), len(reference)))
    gaps = [p.top2_logit_gap for e in trace.events for p in e.positions]
    return f"first difference at new token {i}; smallest top-2 logit gaps seen: {sorted(gaps)[:3]}"
