"""The bundled Qwen2.5-Coder pair, loaded for real (prepared by `python -m specviz models --prepare qwen-coder`)."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.workshop.cli import main
from specviz.lm import load_pair
from specviz.models.files.convert import bundled_folder
from specviz.models.catalogue.presets import get_preset

pytestmark = pytest.mark.bundled

QWEN_VOCAB = 151_936  # LM-head rows of both GGUFs, and entries of their tokenizer


@pytest.fixture(scope="module")
def pair():
    return load_pair("qwen-coder", device="cpu", dtype="float32")


def test_both_models_score_the_same_vocabulary(pair):
    assert pair.draft is not None
    assert pair.vocab_size == QWEN_VOCAB == len(pair.tokenizer)
    ids = torch.tensor([pair.tokenizer("def fibonacci(n):\n    ").input_ids])
    with torch.inference_mode():
        p = pair.target(ids).logits[0, -1, : pair.vocab_size].softmax(-1)
        q = pair.draft(ids).logits[0, -1, : pair.vocab_size].softmax(-1)
    assert p.shape == q.shape == (QWEN_VOCAB,)
    assert torch.isfinite(p).all() and torch.isfinite(q).all()
    # Same tokenizer, same family: the two agree on what follows far more than chance does
    # (overlap sum(min(p, q)) of unrelated models over 151,936 ids would be near 0).
    assert torch.minimum(p, q).sum() > 0.2


def test_the_tokenizer_round_trips_code_and_the_chat_template(pair):
    text = "for i in range(10):\n    print(f'{i:>3} ✓ 日本')\n"
    assert pair.tokenizer.decode(pair.tokenizer(text).input_ids) == text
    chat = pair.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat.endswith("<|im_start|>assistant\n")
    assert pair.tokenizer.eos_token == "<|im_end|>"


def test_the_load_is_described_and_cached(pair):
    assert pair.info["preset"] == "qwen-coder" and pair.info["dtype"] == "float32"
    preset = get_preset("qwen-coder")
    for role, source in (("draft", preset.draft), ("target", preset.target)):
        info = pair.info[role]
        assert info["kind"] == "bundled" and info["quant"].startswith("GGUF Q4_K_M")
        assert info["params"] == source.params
        assert info["converted"] == str(bundled_folder(source.bundled))
    assert load_pair("qwen-coder", device="cpu", dtype="float32") is pair
    solo = load_pair("qwen-coder", with_draft=False, device="cpu", dtype="float32")
    assert solo.draft is None and solo.target is pair.target


def test_prepare_reports_the_converted_folders(capsys):
    assert main(["models", "--prepare", "qwen-coder", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    preset = get_preset("qwen-coder")
    assert result["target"]["folder"] == str(bundled_folder(preset.target.bundled))
    assert result["draft"]["folder"] == str(bundled_folder(preset.draft.bundled))
