"""The lean drafting loop (specviz/lm/torch_runtime/lean.py) computes what transformers' forward computes.

Exactness does not need it (q is whatever the draft sampled from), but a draft that drifted
from its model would draft worse, and a broken cache (a crop that keeps a stale key, a grown
buffer that loses one) would show up only as a lower acceptance rate. So the logits are
compared with `CachedLM` over transformers' forward through every cache operation a drafter
uses: a prompt, one-token feeds, a crop and a several-token feed, a buffer that grows, a
reset.
"""

import pytest
import torch

from specviz.lm.torch_runtime import lean
from specviz.lm.torch_runtime.cached import CachedLM, model_forward
from specviz.lm.torch_runtime.lean import LeanLM, model_lm, lean_supported
from specviz.lm.torch_runtime.int8_draft import quantized
from tiny_models import DEVICE, tiny_model, tiny_tokenizer

# fp32 sums taken in another order (the lean loop multiplies by oneDNN-packed weights where
# it can), as a share of the step's largest logit: far below any logit gap that matters.
TOLERANCE = 1e-4
BF16_TOLERANCE = 3e-2  # a few bf16 roundings (2**-8 each) of the largest logit


def tiny_llama(rope: dict | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tiny_tokenizer()),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        initializer_range=0.6,
        tie_word_embeddings=False,
        rope_parameters=rope,
    )
    torch.manual_seed(3)
    return LlamaForCausalLM(config).eval()


def same_logits_through_a_run(model, capacity_steps: bool, tolerance: float = TOLERANCE):
    """Feed both LMs the same sequence of operations; every step's logits must agree."""
    model = model.to(DEVICE)
    g = torch.Generator().manual_seed(0)

    def ids(n):
        return torch.randint(0, model.config.vocab_size, (n,), generator=g)

    ref = CachedLM(model_forward(model), model.config, DEVICE)
    new = LeanLM(model, DEVICE)
    steps = 0
    with torch.inference_mode():

        def both(tokens, keep=1):
            nonlocal steps
            a, b = ref.feed(tokens, keep), new.feed(tokens, keep)
            assert a.shape == b.shape
            torch.testing.assert_close(b, a, atol=tolerance * max(1.0, a.abs().max().item()), rtol=0)
            assert ref.length == new.length
            steps += 1

        both(ids(11), keep=0)  # a prompt, every position's logits
        for _ in range(4):
            both(ids(1))
        ref.crop(13), new.crop(13)  # a rejected draft
        both(ids(3), keep=0)  # the accepted draft and the target's token in one pass
        both(ids(2), keep=1)
        if capacity_steps:
            both(ids(9), keep=2)  # beyond the first buffers: they grow and keep their contents
            for _ in range(3):
                both(ids(1))
        ref.reset(), new.reset()
        both(ids(5), keep=0)  # a new run reuses the buffers
        both(ids(1))
    return steps


def test_lean_qwen2_matches_transformers_through_crops_and_growth(monkeypatch):
    monkeypatch.setattr(lean, "FIRST_CAPACITY", 8)  # so the run outgrows the buffers twice
    model = tiny_model(0)
    assert lean_supported(model)
    assert same_logits_through_a_run(model, capacity_steps=True) == 13


@pytest.mark.skipif(DEVICE.type != "cpu", reason="dynamic int8 runs on a CPU only")
def test_lean_int8_draft_matches_transformers():
    # The CPU's draft: every linear layer an int8 module, the same module objects both ways.
    model = quantized(tiny_model(1000, noise_from=0, noise=0.02))
    assert lean_supported(model)
    same_logits_through_a_run(model, capacity_steps=False)


def test_lean_bf16_target_matches_transformers():
    # A target in its published precision: normed as transformers norms it (in fp32, then
    # rounded), so what differs is the products' summation order, within a few bf16 steps.
    model = tiny_model(0, dtype=torch.bfloat16)
    same_logits_through_a_run(model, capacity_steps=False, tolerance=BF16_TOLERANCE)


@pytest.mark.parametrize(
    "rope",
    [
        None,
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    ],
)
def test_lean_llama_matches_transformers(rope):
    model = tiny_llama(rope)
    assert lean_supported(model)
    same_logits_through_a_run(model, capacity_steps=False)


def test_other_shapes_keep_transformers_forward():
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2)).eval()
    sliding = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            use_sliding_window=True,
            sliding_window=8,
            max_window_layers=0,
        )
    ).eval()
    dynamic = tiny_llama({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})
    for model in (gpt2, sliding, dynamic):
        assert not lean_supported(model)
        assert isinstance(model_lm(model, DEVICE), CachedLM)
    assert isinstance(model_lm(tiny_model(0), DEVICE), LeanLM)
