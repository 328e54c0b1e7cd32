"""The vocabulary check: the same ids, or a pair with different vocabularies that says how it
will draft (never refused)."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from specviz.models.errors import VocabMismatchError
from specviz.models.alignment.vocab import check_vocab, shared_vocab_size, vocab_differences

WORDS = ["<unk>", "def", "return", "print", "(", ")", ":", "x", "y", "z"]


def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def tiny_lm(rows: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=rows,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config)


def test_identical_vocabularies_pass():
    a, b = word_tokenizer(WORDS), word_tokenizer(list(WORDS))
    assert vocab_differences(a, b) == []
    m, message = check_vocab(a, b, "draft-model", "target-model")
    assert m.identical and "share one vocabulary" in message


def test_swapped_ids_are_not_refused_the_pair_drafts_through_the_shared_tokens():
    swapped = WORDS[:2] + [WORDS[3], WORDS[2]] + WORDS[4:]  # "return" and "print" trade ids
    m, message = check_vocab(word_tokenizer(WORDS), word_tokenizer(swapped), "draft-model", "target-model")
    assert not m.identical and m.method == "intersection" and m.overlap == 1.0
    assert m.draft_to_target.tolist() == [0, 1, 3, 2, 4, 5, 6, 7, 8, 9]
    assert "draft-model and target-model have different vocabularies" in message
    assert "id 2: draft 'return' vs target 'print'" in message
    assert "The pair drafts by intersection: 100.0% of the target's vocabulary" in message


def test_vocabularies_sharing_little_draft_through_text():
    other = ["<unk>", "alpha", "beta", "gamma", "delta", "x"]  # only <unk> and x shared: 2 of 10 target entries
    m, message = check_vocab(word_tokenizer(other), word_tokenizer(WORDS), "draft-model", "target-model")
    assert (m.shared, m.method) == (2, "text") and m.overlap == pytest.approx(0.2)
    assert "The pair drafts by text: 20.0% of the target's vocabulary" in message and "below 50%" in message


def test_a_longer_vocabulary_shows_the_missing_entries():
    diffs = vocab_differences(word_tokenizer(WORDS), word_tokenizer(WORDS + ["extra"]))
    assert diffs == ["id 10: draft (none) vs target 'extra'"]


def test_at_most_five_differences_are_shown():
    reversed_words = WORDS[:1] + WORDS[1:][::-1]
    assert len(vocab_differences(word_tokenizer(WORDS), word_tokenizer(reversed_words))) == 5


def test_padded_heads_work_on_the_rows_both_have():
    tok = word_tokenizer(WORDS)  # 10 entries
    with torch.no_grad():
        target, draft = tiny_lm(64), tiny_lm(16)  # LM heads padded to different sizes
    assert shared_vocab_size(tok, target, draft, "pair") == 16
    assert shared_vocab_size(tok, target, None, "pair") == 64


def test_a_head_smaller_than_the_tokenizer_is_refused():
    with pytest.raises(VocabMismatchError, match="tokenizer has 10 entries but the model scores only 8 ids"):
        shared_vocab_size(word_tokenizer(WORDS), tiny_lm(64), tiny_lm(8), "pair")
