"""Can these two models draft for each other? Only if they speak the same vocabulary.

Speculative decoding compares p and q id by id, so the draft and the target must map every
string to the same id. Their LM heads may still differ in size (rows padded to a multiple of
64 or 128, e.g. 151936 vs 152064): the work then happens on the rows both have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specviz.models.errors import VocabMismatchError

SHOWN_DIFFERENCES = 5


def vocab_differences(draft_tok: Any, target_tok: Any, limit: int = SHOWN_DIFFERENCES) -> list[str]:
    """The first `limit` ids (in id order) whose string differs between the two tokenizers."""
    by_id_d = {i: s for s, i in draft_tok.get_vocab().items()}
    by_id_t = {i: s for s, i in target_tok.get_vocab().items()}
    out = []
    for i in sorted(by_id_d.keys() | by_id_t.keys()):
        d, t = by_id_d.get(i), by_id_t.get(i)
        if d != t:
            out.append(f"id {i}: draft {_show(d)} vs target {_show(t)}")
            if len(out) == limit:
                break
    return out


def _show(s: str | None) -> str:
    return "(none)" if s is None else repr(s)


def check_same_vocab(draft_tok: Any, target_tok: Any, draft_name: str, target_name: str) -> None:
    """Raise VocabMismatchError, naming both models and the first differences, unless the
    two tokenizers map the same strings to the same ids."""
    diffs = vocab_differences(draft_tok, target_tok)
    if diffs:
        n_d, n_t = len(draft_tok.get_vocab()), len(target_tok.get_vocab())
        raise VocabMismatchError(
            f"{draft_name} cannot draft for {target_name}: their vocabularies differ "
            f"({n_d:,} vs {n_t:,} entries; first differences: {'; '.join(diffs)}). "
            "Pick a draft from the same model family, or a self-drafting method (prompt lookup, early exit)."
        )


# The files that define a transformers tokenizer's vocabulary and special tokens.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model")


def same_tokenizer_files(a: Path, b: Path) -> bool:
    """True if folders `a` and `b` hold byte-identical tokenizer files (so the same vocabulary)."""
    if not (a / "tokenizer.json").is_file():
        return False
    for name in TOKENIZER_FILES:
        fa, fb = a / name, b / name
        if fa.is_file() != fb.is_file() or (fa.is_file() and fa.read_bytes() != fb.read_bytes()):
            return False
    return True


def head_rows(model: torch.nn.Module) -> int:
    """How many token ids the model scores (its LM head's rows)."""
    head = model.get_output_embeddings()  # a Linear, or an int8 one (no weight tensor)
    return int(head.out_features) if head is not None else int(model.config.vocab_size)


def shared_vocab_size(tokenizer: Any, target: torch.nn.Module, draft: torch.nn.Module | None, names: str) -> int:
    """The ids both models score; every id the tokenizer can produce must be among them."""
    rows = head_rows(target) if draft is None else min(head_rows(target), head_rows(draft))
    if len(tokenizer) > rows:
        raise VocabMismatchError(
            f"{names}: the tokenizer has {len(tokenizer):,} entries but the model scores only {rows:,} ids"
        )
    return rows
