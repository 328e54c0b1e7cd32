"""Tiny random models and a tiny tokenizer, built in-process: tests need no downloads.

The tokenizer is a byte-level BPE (like Qwen's) trained on a few lines, so multi-byte
characters split across tokens exactly as they do with real models. The models are Qwen2
architecture with a few layers and a 64-wide hidden state; `initializer_range` is raised
from 0.02 to 0.6 so that next-token distributions are peaked enough for top-k / top-p and
acceptance to mean something (at 0.02 every distribution is nearly uniform).

    pair = tiny_pair("close")       # target + a draft that mostly agrees with it
    pair = tiny_pair("random")      # target + an unrelated draft
    pair = tiny_pair("same")        # target + a draft with identical weights
    pair = tiny_pair(None)          # target only (prompt lookup, early exit)

Everything is cached per argument tuple: treat the returned objects as read-only.

`tiny_pair` and the lean loop's tests run on `DEVICE`: the CPU, or the one named by
SPECVIZ_TEST_DEVICE, so that on a machine with a GPU

    SPECVIZ_TEST_DEVICE=cuda python -m pytest tests/test_lm_lean.py tests/test_engine.py

checks both loops and greedy exactness on CUDA (drafts in dynamic int8 are skipped there).
"""

from __future__ import annotations

import functools
import os

import pytest
import torch

from specviz.lm.pair import ModelPair

DEVICE = torch.device(os.environ.get("SPECVIZ_TEST_DEVICE") or "cpu")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "def reverse(s):\n    return s[::-1]\n\nprint(reverse('hello'))\n",
    "for i in range(10):\n    if i % 2 == 0:\n        print(i)\n",
    "The quick brown fox jumps over the lazy dog. The dog sleeps in the sun.",
    "Speculative decoding: a small model drafts, a large model verifies.",
    "héllo wörld, naïve café, 日本語のテキスト, emoji 🙂🚀",
]
TOKENIZER_VOCAB = 384
# Weight noise of the "close" draft: enough that it disagrees with the target now and then.
CLOSE_NOISE = 0.02


@pytest.fixture(scope="module")
def single_thread():
    """Tiny models run fastest on one thread, and a busy machine slows a thread pool most.
    Use with `pytestmark = pytest.mark.usefixtures("single_thread")` after importing it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@functools.lru_cache(maxsize=None)
def tiny_tokenizer(chat_template: bool = True):
    """A byte-level BPE tokenizer with Qwen-style chat specials; EOS is <|im_end|>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE if chat_template else None,
    )


@functools.lru_cache(maxsize=None)
def tiny_model(
    seed: int = 0,
    *,
    layers: int = 4,
    hidden: int = 64,
    dtype: torch.dtype = torch.float32,
    noise_from: int | None = None,
    noise: float = 0.0,
):
    """A random Qwen2 causal LM over the tiny tokenizer's vocabulary.

    With `noise_from=S`, the weights are those of `tiny_model(S)` plus Gaussian noise of
    standard deviation `noise` (seeded by `seed`): a draft that mostly agrees with its target.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tiny_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.6,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed if noise_from is None else noise_from)
    model = Qwen2ForCausalLM(config)
    if noise_from is not None:
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn(param.shape, generator=g) * noise)
    return model.to(dtype).eval()


@functools.lru_cache(maxsize=None)
def tiny_pair(
    draft: str | None = "close",
    *,
    seed: int = 0,
    layers: int = 4,
    dtype: torch.dtype = torch.float32,
    chat_template: bool = True,
) -> ModelPair:
    """A ModelPair of tiny models on DEVICE.

    draft: "close" (the target's weights plus a little noise), "close-int8" (that draft
    quantized as a CPU load quantizes drafts), "random" (independent weights), "same"
    (identical weights, a separate module), or None (no draft model).
    """
    from specviz.lm.torch_runtime.int8_draft import quantized

    tok = tiny_tokenizer(chat_template)
    target = tiny_model(seed, layers=layers, dtype=dtype)
    drafts = {
        None: lambda: None,
        "same": lambda: tiny_model(seed, layers=layers, dtype=dtype, noise_from=seed, noise=0.0),
        "close": lambda: tiny_model(seed + 1000, layers=layers, dtype=dtype, noise_from=seed, noise=CLOSE_NOISE),
        "close-int8": lambda: quantized(
            tiny_model(seed + 1000, layers=layers, dtype=dtype, noise_from=seed, noise=CLOSE_NOISE)
        ),
        "random": lambda: tiny_model(seed + 1, layers=2, dtype=dtype),
    }
    if draft not in drafts:
        raise ValueError(f"unknown tiny draft kind {draft!r}")
    if draft == "close-int8" and DEVICE.type != "cpu":
        pytest.skip("dynamic int8 runs on a CPU only")
    made = drafts[draft]()
    return ModelPair(
        name=f"tiny-{draft or 'solo'}",
        tokenizer=tok,
        target=target.to(DEVICE),
        draft=None if made is None else made.to(DEVICE),
        vocab_size=len(tok),
        device=DEVICE,
        dtype=dtype,
    )
