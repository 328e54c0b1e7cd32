"""Do these two models speak the same vocabulary, and if not, how will the draft draft?

Speculative decoding compares p and q id by id. When the draft and the target map every
string to the same id, the draft proposes target ids directly; their LM heads may still
differ in size (rows padded to a multiple of 64 or 128, e.g. 151936 vs 152064): the work then
happens on the rows both have. When they do not, the pair drafts through text or through the
shared tokens (`vocab_map.py`, `drafters/cross_vocab.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specviz.models.errors import VocabMismatchError
from specviz.models.alignment.vocab_map import VocabMap, vocab_map

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


def check_vocab(
    draft_tok: Any,
    target_tok: Any,
    draft_name: str,
    target_name: str,
    *,
    draft_rows: int | None = None,
    target_rows: int | None = None,
) -> tuple[VocabMap, str]:
    """Line the draft's vocabulary up with the target's and say, in words, how the pair will
    draft: with the same ids, or through text or the shared tokens, and why."""
    m = vocab_map(draft_tok, target_tok, draft_rows=draft_rows, target_rows=target_rows)
    if m.identical:
        return m, f"{draft_name} and {target_name} share one vocabulary: the draft proposes target ids directly"
    diffs = vocab_differences(draft_tok, target_tok, limit=3)
    message = (
        f"{draft_name} and {target_name} have different vocabularies ({m.draft_entries:,} vs {m.target_entries:,} "
        f"entries, {m.shared:,} with the same text; first differing ids: {'; '.join(diffs)}). "
        f"The pair drafts by {m.method}: {m.reason}"
    )
    return m, message


# The files that define a transformers tokenizer's vocabulary and special tokens.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


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
    if not isinstance(model, torch.nn.Module):  # another runtime's model (lm.runtime): its logits rows' width
        return int(model.vocab_size)
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
