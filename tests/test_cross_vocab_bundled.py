"""The bundled cross-tokenizer pair smol-qwen: SmolLM2-135M (its own 49k vocabulary) drafts for
Qwen2.5-Coder-1.5B (151k). Greedy speculative decoding through text and through the shared
tokens gives the target's own greedy output token for token.
Run with `flock /tmp/specviz-heavy.lock python -m pytest tests/test_cross_vocab_bundled.py -m bundled`
after `python -m specviz models --prepare smol-qwen` (minutes on a CPU).
"""

import pytest
import torch

from specviz.drafters.cross_vocab import make_cross_drafter
from specviz.engine.verify import verify
from specviz.lm.torch_runtime.cached import CachedLM, model_forward
from specviz.lm.prompt import encode_prompt
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.bundled

PROMPT = "Write a function that reverses a string"
NEW_TOKENS = 32
SETTINGS = GenerationSettings(max_new_tokens=NEW_TOKENS)


@pytest.fixture(scope="module")
def pair():
    from specviz.lm import load_pair

    # fp32: outputs are compared token for token (see test_engine_bundled.py)
    return load_pair("smol-qwen", dtype="float32")


@pytest.fixture(scope="module")
def plain(pair):
    ids = encode_prompt(pair, PROMPT, SETTINGS)
    with torch.inference_mode():
        lm = CachedLM(model_forward(pair.target), pair.target.config, pair.device)
        out = list(ids)
        logits = lm.feed(torch.tensor(out))[-1]
        for _ in range(NEW_TOKENS):
            out.append(int(logits[: pair.vocab_size].argmax()))
            logits = lm.feed(torch.tensor(out[-1:]))[-1]
    return ids, out[len(ids) :]


def test_the_pair_is_cross_tokenizer_with_its_vocabulary_overlap(pair):
    assert pair.cross_tokenizer and len(pair.draft_tokenizer) == 49152 and pair.vocab_size >= len(pair.tokenizer)
    info = pair.info["vocab"]
    assert info["method"] == pair.vocab_map.method and 0 < info["overlap"] < 0.5  # 49k of 151k at most
    assert "different vocabularies" in info["message"]


@pytest.mark.parametrize("method", ["text", "intersection"])
def test_greedy_speculative_equals_the_targets_plain_greedy(pair, plain, method):
    ids, expected = plain
    drafter = make_cross_drafter(pair, SETTINGS, None, method)
    with torch.inference_mode():
        lm = CachedLM(model_forward(pair.target), pair.target.config, pair.device)
        context = torch.tensor(ids)
        lm.feed(context[:-1])
        drafter.begin(context)
        rounds = accepted = 0
        while context.numel() - len(ids) < NEW_TOKENS:
            remaining = NEW_TOKENS - (context.numel() - len(ids))
            proposal = drafter.propose(context, min(4, remaining - 1), lambda c: True)
            logits = lm.feed(torch.cat([context[-1:], proposal.tokens]), keep=0)[:, : pair.vocab_size]
            v = verify(proposal.tokens, logits, None, greedy=True)
            lm.crop(context.numel() + v.n_accepted)
            context = torch.cat([context, torch.tensor(v.new_tokens)])
            drafter.accepted(v.n_accepted)
            rounds += 1
            accepted += v.n_accepted
    assert context[len(ids) :].tolist() == expected
    print(f"{method}: {rounds} rounds, {accepted} of {NEW_TOKENS} tokens from accepted drafts")
    assert rounds < NEW_TOKENS  # some drafts were accepted
