"""The vocabulary check: a draft must map every string to the same id as its target."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from specviz.models.errors import VocabMismatchError
from specviz.models.vocab import check_same_vocab, shared_vocab_size, vocab_differences

WORDS = ["<unk>", "def", "return", "print", "(", ")", ":", "x", "y", "z"]


def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def tiny_lm(rows: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=rows, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config)


def test_identical_vocabularies_pass():
    a, b = word_tokenizer(WORDS), word_tokenizer(list(WORDS))
    assert vocab_differences(a, b) == []
    check_same_vocab(a, b, "draft-model", "target-model")


def test_swapped_ids_are_refused_naming_both_models_and_the_first_differences():
    swapped = WORDS[:2] + [WORDS[3], WORDS[2]] + WORDS[4:]  # "return" and "print" trade ids
    with pytest.raises(VocabMismatchError) as err:
        check_same_vocab(word_tokenizer(WORDS), word_tokenizer(swapped), "draft-model", "target-model")
    message = str(err.value)
    assert "draft-model" in message and "target-model" in message
    assert "id 2: draft 'return' vs target 'print'" in message
    assert "id 3: draft 'print' vs target 'return'" in message


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
