"""The llama.cpp runtime on the bundled GGUF files (Q4_K_M), as llama.cpp runs them.

- llama.cpp's own tokenizer and the cached transformers tokenizer give the same ids for
  every bench prompt in the chat template;
- greedy speculative decoding equals plain greedy decoding on the same runtime, or the two
  first part where the target's top two logits are a near-tie: llama.cpp's quantised
  products round a pass over several tokens differently from a one-token pass (as bf16 does
  in torch), which can swap two tokens whose logits lie within NEAR_TIE of each other; a
  wrong mask, position or cache row parts them where the target is sure, at gaps of units.
"""

import pytest
import torch

pytest.importorskip("llama_cpp")

from specviz import engine  # noqa: E402
from specviz.lm.prompt import encode_prompt  # noqa: E402
from specviz.workshop.bench.prompts import DEFAULT_PROMPTS, load_prompts  # noqa: E402
from specviz.lm.llamacpp_runtime.lm import LlamaCppLM  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402

pytestmark = pytest.mark.bundled

NEAR_TIE = 0.5  # logits
NEW_TOKENS = 32
PROMPTS = ["Write a function that reverses a string", "Explain in two sentences why the sky is blue."]


@pytest.fixture(scope="module")
def pair():
    from specviz.lm import load_pair

    return load_pair("qwen-coder", runtime="llama.cpp")


def _messages(p) -> list[dict]:
    """A bench prompt as a conversation: a "prompt" string is one user turn."""
    return p.prompt if isinstance(p.prompt, list) else [{"role": "user", "content": p.prompt}]


def test_llamacpp_tokenizes_the_bench_prompts_as_the_transformers_tokenizer_does(pair):
    tok = pair.tokenizer
    for p in load_prompts(DEFAULT_PROMPTS):
        text = tok.apply_chat_template(_messages(p), add_generation_prompt=True, tokenize=False)
        assert pair.target.tokenize(text) == tok(text, add_special_tokens=False)["input_ids"], p.id


def test_one_tokenizer_serves_both_models_when_their_files_say_the_same_vocabulary(pair):
    # The load compares the files' tokenizer metadata (gguf_info.vocabulary_digest) and builds
    # no tokenizer for the draft; here the draft's own is built and tokenizes alike.
    from pathlib import Path

    from specviz.lm.llamacpp_runtime.pair import _gguf_tokenizer

    assert pair.info["vocab"]["method"] == "same" and pair.draft_tokenizer is None
    own = _gguf_tokenizer(Path(pair.info["draft"]["file"]))
    tok = pair.tokenizer
    for p in load_prompts(DEFAULT_PROMPTS):
        text = tok.apply_chat_template(_messages(p), add_generation_prompt=True, tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert own(text, add_special_tokens=False)["input_ids"] == ids == pair.draft.tokenize(text), p.id


@pytest.mark.parametrize("preset", ["qwen-coder", "smol-qwen"])
def test_the_tokenizer_read_from_a_gguf_is_the_one_transformers_converts(preset):
    # Built once per file on a cold cache (llamacpp_runtime/pair.py: _gguf_tokenizer, which skips
    # AutoTokenizer's parse of the whole file); compared with the torch conversion's tokenizer,
    # which CI prepares for both presets.
    from transformers import AutoTokenizer

    from specviz.models.files import cache
    from specviz.models.files.convert import bundled_folder, ensure_gguf
    from specviz.lm.llamacpp_runtime.pair import _gguf_tokenizer
    from specviz.models.catalogue.sources import resolve

    plan = resolve(preset)
    for ref in (plan.target, plan.draft):
        folder = bundled_folder(ref.bundled)
        if not cache.folder_is_valid(folder):
            pytest.skip(f"{preset} is not converted for torch here")
        fast, ref_tok = (
            _gguf_tokenizer(ensure_gguf(ref.bundled, preset, lambda f, m: None)),
            AutoTokenizer.from_pretrained(folder),
        )
        assert (len(fast), fast.eos_token, fast.bos_token, fast.pad_token) == (
            len(ref_tok),
            ref_tok.eos_token,
            ref_tok.bos_token,
            ref_tok.pad_token,
        )
        assert fast.chat_template == ref_tok.chat_template
        for p, text in ((p, m["content"]) for p in load_prompts(DEFAULT_PROMPTS) for m in _messages(p)):
            ids = ref_tok(text)["input_ids"]
            assert fast(text)["input_ids"] == ids, p.id
            assert fast.decode(ids) == ref_tok.decode(ids), p.id


def _top2_gap(pair, ids: list[int]) -> float:
    lm = LlamaCppLM(pair.target)
    top = lm.feed(torch.tensor(ids))[-1, : pair.vocab_size].topk(2).values
    return float(top[0] - top[1])


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize(
    "drafter,extra",
    [
        ("model", {"k": 4, "policy": "fixed"}),
        ("tree", {"tree_nodes": 8, "tree_width": 2}),
        ("lookup", {"k": 4, "policy": "fixed"}),
    ],
)
def test_greedy_speculative_equals_plain_or_parts_at_a_near_tie(pair, prompt, drafter, extra):
    base = GenerationSettings(max_new_tokens=NEW_TOKENS)
    plain = engine.run(pair, prompt, GenerationSettings(max_new_tokens=NEW_TOKENS, mode="plain"))
    spec = engine.run(pair, prompt, GenerationSettings(max_new_tokens=NEW_TOKENS, drafter=drafter, **extra))
    assert len(plain.token_ids) == NEW_TOKENS or plain.summary.stop_reason == "eos"
    if spec.token_ids == plain.token_ids:
        return
    i = next(j for j, (a, b) in enumerate(zip(spec.token_ids, plain.token_ids)) if a != b)
    gap = _top2_gap(pair, encode_prompt(pair, prompt, base) + plain.token_ids[:i])
    assert gap < NEAR_TIE, f"parted at new token {i} where the top-2 gap is {gap:.3f}, no near-tie"


@pytest.mark.parametrize("vocab_method", ["text", "intersection"])
def test_a_draft_with_another_tokenizer_drafts_on_llamacpp_too(vocab_method):
    from specviz.lm import load_pair

    cross = load_pair("smol-qwen", runtime="llama.cpp")
    assert cross.cross_tokenizer and cross.runtime == "llama.cpp"
    prompt = PROMPTS[0]
    plain = engine.run(cross, prompt, GenerationSettings(max_new_tokens=24, mode="plain"))
    spec = engine.run(
        cross, prompt, GenerationSettings(max_new_tokens=24, k=4, policy="fixed", vocab_method=vocab_method)
    )
    assert spec.summary.drafted > 0 and spec.summary.accepted > 0
    if spec.token_ids != plain.token_ids:
        i = next(j for j, (a, b) in enumerate(zip(spec.token_ids, plain.token_ids)) if a != b)
        base = GenerationSettings(max_new_tokens=24)
        gap = _top2_gap(cross, encode_prompt(cross, prompt, base) + plain.token_ids[:i])
        assert gap < NEAR_TIE, f"parted at new token {i} where the top-2 gap is {gap:.3f}, no near-tie"
