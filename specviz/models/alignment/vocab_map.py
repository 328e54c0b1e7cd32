"""Two vocabularies side by side: what each token stands for, which tokens both have, and how
a draft with a different tokenizer should draft for its target.

Token strings are not comparable as they are: a byte-level BPE (GPT-2, Qwen, SmolLM2) writes a
space as `Ġ` and a newline as `Ċ`, a SentencePiece model writes a space as `▁` and a raw byte
as `<0x0A>`. Each token is first mapped to the bytes it stands for; two tokens match when
their bytes are equal (special tokens stand for their own text, so `<|im_end|>` matches
`<|im_end|>`).

    m = vocab_map(draft_tokenizer, target_tokenizer)
    m.draft_to_target[d]   # the target id with the same text as draft id d, or -1
    m.overlap              # share of the target's entries that the draft also has
    m.method, m.reason     # "intersection" or "text", and why
"""

from __future__ import annotations

from specviz.choices import INTERSECTION, TEXT

import json
import re
from dataclasses import dataclass, field
from typing import Any

import torch

METHODS = (TEXT, INTERSECTION)

# The default method is `intersection` when at least this share of the target's vocabulary
# has an exact match in the draft's. The intersection drafter can only propose shared tokens:
# each time the target writes a token the draft lacks, the round ends there. Tokenizers
# trained on similar text with the same pre-tokenisation share most of their entries (and
# nearly all of the frequent ones); below half, a large share of what the target writes
# (long identifiers, runs of indentation, other scripts) has no counterpart, and drafting
# through text, which can propose any target token, keeps more of each round.
INTERSECTION_MIN_OVERLAP = 0.5

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_METASPACE = "\u2581"  # ▁


def _gpt2_byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode: the printable character that stands for each byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_DECODER = _gpt2_byte_decoder()
_BYTE_ENCODER = {b: c for c, b in _BYTE_DECODER.items()}


def scheme(tokenizer: Any) -> str:
    """How the tokenizer writes text in its vocabulary: "byte-level" (GPT-2 style),
    "metaspace" (SentencePiece style: `▁` for a space, `<0xNN>` byte tokens) or "plain"."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        parts = json.dumps([spec.get("decoder"), spec.get("pre_tokenizer")])
        if '"ByteLevel"' in parts:
            return "byte-level"
        if '"Metaspace"' in parts or _METASPACE in parts:
            return "metaspace"
    vocab = tokenizer.get_vocab()
    sample = list(vocab)[:5000]
    if sum(s.startswith("Ġ") for s in sample) > sum(s.startswith(_METASPACE) for s in sample):
        return "byte-level"
    if any(s.startswith(_METASPACE) for s in sample):
        return "metaspace"
    return "plain"


def _strings(tokenizer: Any) -> tuple[list[str | None], set[int]]:
    """Each id's token string (None for ids the tokenizer lacks), and the added tokens' ids."""
    vocab = tokenizer.get_vocab()
    added = {int(i): t.content for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    out: list[str | None] = [None] * (max([*vocab.values(), *added.keys(), -1]) + 1)
    for s, i in vocab.items():
        out[i] = s
    for i, content in added.items():
        out[i] = content
    return out, set(added)


def _table(strings: list[str | None], added: set[int], kind: str) -> list[bytes | None]:
    """The bytes each token id stands for, indexed by id (None for ids the tokenizer lacks).
    Added and special tokens stand for their own text; a byte-level token whose characters
    are not all byte characters is kept as its UTF-8 text."""
    return [
        None if s is None else s.encode("utf-8") if i in added else _text_bytes(s, kind) for i, s in enumerate(strings)
    ]


def _text_bytes(s: str, kind: str) -> bytes:
    if kind == "byte-level":
        if all(c in _BYTE_DECODER for c in s):
            return bytes(_BYTE_DECODER[c] for c in s)
        return s.encode("utf-8")
    if kind == "metaspace":
        m = _BYTE_TOKEN.match(s)
        if m:
            return bytes([int(m.group(1), 16)])
        return s.replace(_METASPACE, " ").encode("utf-8")
    return s.encode("utf-8")


@dataclass(frozen=True)
class VocabMap:
    """How a draft's vocabulary lines up with its target's.

    `draft_to_target` (draft_rows,): for each draft id, the target id whose token stands for
    the same bytes, or -1 (also for LM-head padding rows). The map is one-to-one: where
    several ids of one tokenizer stand for the same bytes (a SentencePiece `▁` and `<0x20>`),
    the regular token is kept.
    """

    draft_to_target: torch.Tensor
    target_rows: int
    draft_entries: int  # ids the draft tokenizer has
    target_entries: int  # ids the target tokenizer has
    shared: int  # draft ids with a match
    identical: bool  # the same bytes under the same ids, entry for entry
    draft_scheme: str
    target_scheme: str
    method: str  # the default method for this pair
    reason: str  # why, in words
    # Both tokenizers seen as bytes, read once here and kept for the cross-tokenizer drafters.
    draft_text: "TokenText" = field(compare=False, repr=False)
    target_text: "TokenText" = field(compare=False, repr=False)

    @property
    def overlap(self) -> float:
        """Share of the target's vocabulary with an exact match in the draft's."""
        return self.shared / max(self.target_entries, 1)

    @property
    def target_to_draft(self) -> torch.Tensor:
        """(target_rows,) the draft id for each target id, or -1."""
        out = torch.full((self.target_rows,), -1, dtype=torch.long)
        d = torch.nonzero(self.draft_to_target >= 0).squeeze(-1)
        out[self.draft_to_target[d]] = d
        return out

    @property
    def allowed(self) -> torch.Tensor:
        """(draft_rows,) bool: the draft ids in the intersection."""
        return self.draft_to_target >= 0

    def summary(self) -> dict[str, Any]:
        """Plain values for pair.info, traces and the page."""
        return {
            "method": self.method,
            "reason": self.reason,
            "overlap": round(self.overlap, 4),
            "shared": self.shared,
            "draft_entries": self.draft_entries,
            "target_entries": self.target_entries,
            "identical": self.identical,
            "draft_scheme": self.draft_scheme,
            "target_scheme": self.target_scheme,
            "intersection_min_overlap": INTERSECTION_MIN_OVERLAP,
        }


def default_method(overlap: float) -> tuple[str, str]:
    """The method a cross-tokenizer pair uses unless told otherwise, and why."""
    share = f"{overlap:.1%} of the target's vocabulary has an exact match in the draft's"
    if overlap >= INTERSECTION_MIN_OVERLAP:
        return INTERSECTION, (
            f"{share} (at least {INTERSECTION_MIN_OVERLAP:.0%}): the draft proposes from its own "
            "distribution restricted to the shared tokens, exact at any temperature"
        )
    return TEXT, (
        f"{share} (below {INTERSECTION_MIN_OVERLAP:.0%}): the draft's tokens are turned into text "
        "and re-encoded with the target's tokenizer, so any target token can be proposed"
    )


def vocab_map(
    draft_tok: Any, target_tok: Any, *, draft_rows: int | None = None, target_rows: int | None = None
) -> VocabMap:
    """Line the draft's vocabulary up with the target's (see VocabMap).

    `draft_rows` / `target_rows`: the ids each model scores (LM-head rows, padding included);
    default: the tokenizer's size.
    """
    d_text, t_text = TokenText(draft_tok), TokenText(target_tok)
    draft_rows = max(draft_rows or 0, len(d_text.table))
    target_rows = max(target_rows or 0, len(t_text.table))
    d2t = torch.full((draft_rows,), -1, dtype=torch.long)
    for b, d in d_text.index.items():
        t = t_text.index.get(b)
        if t is not None:
            d2t[d] = t
    shared = int((d2t >= 0).sum())
    identical = d_text.strings == t_text.strings
    method, reason = default_method(shared / max(t_text.entries, 1))
    if identical:
        method, reason = "same", "the draft and the target have the same vocabulary"
    return VocabMap(
        draft_to_target=d2t,
        target_rows=target_rows,
        draft_entries=d_text.entries,
        target_entries=t_text.entries,
        shared=shared,
        identical=identical,
        draft_scheme=d_text.scheme,
        target_scheme=t_text.scheme,
        method=method,
        reason=reason,
        draft_text=d_text,
        target_text=t_text,
    )


def _first_by_bytes(table: list[bytes | None], strings: list[str | None]) -> dict[bytes, int]:
    """bytes -> one id standing for them: regular tokens before `<0xNN>` byte tokens, then
    the lowest id."""
    order = sorted(
        (i for i, b in enumerate(table) if b is not None), key=lambda i: (bool(_BYTE_TOKEN.match(strings[i] or "")), i)
    )
    out: dict[bytes, int] = {}
    for i in order:
        out.setdefault(table[i], i)
    return out


class TokenText:
    """A tokenizer seen as bytes: the bytes of a run of ids, and ids for any bytes.

    Text drafting moves between vocabularies through bytes, not strings: a token may end in
    the middle of a multi-byte character, and decoding such a run to a string would lose it.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.scheme = scheme(tokenizer)
        self.strings, added = _strings(tokenizer)
        self.table = _table(self.strings, added, self.scheme)
        self.entries = sum(b is not None for b in self.table)  # the ids the tokenizer has
        self.index = _first_by_bytes(self.table, self.strings)  # bytes -> the one id standing for them
        self._byte_ids = {b: self.index[bytes([b])] for b in range(256) if bytes([b]) in self.index}
        # A byte-level BPE can merge bytes that are not valid UTF-8 (half an emoji) as it
        # does inside text: its model runs on the byte characters directly.
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._bpe = backend.model if backend is not None and self.scheme == "byte-level" else None

    def bytes(self, ids: list[int]) -> bytes:
        table = self.table
        return b"".join(table[i] or b"" if 0 <= i < len(table) else b"" for i in ids)

    def text(self, ids: list[int]) -> str:
        """For display: the bytes as text, a broken character shown as U+FFFD."""
        return self.bytes(ids).decode("utf-8", errors="replace")

    def encode(self, data: bytes) -> list[int]:
        """Ids for `data`: valid UTF-8 through the tokenizer (special tokens recognised), any
        other byte (half a character) as the tokenizer's token for that single byte, if it has one."""
        out: list[int] = []
        text = data.decode("utf-8", errors="surrogateescape")
        for piece in _SURROGATES.split(text):
            if not piece:
                continue
            if _SURROGATES.fullmatch(piece):
                raw = [ord(ch) - 0xDC00 for ch in piece]
                if self._bpe is not None:
                    out.extend(t.id for t in self._bpe.tokenize("".join(_BYTE_ENCODER[b] for b in raw)))
                else:
                    out.extend(self._byte_ids[b] for b in raw if b in self._byte_ids)
            else:
                out.extend(self.tokenizer(piece, add_special_tokens=False)["input_ids"])
        return out

    def starts_mid_character(self, i: int) -> bool:
        """True if token i begins with a UTF-8 continuation byte (it is not a place to cut)."""
        b = self.table[i] if 0 <= i < len(self.table) else None
        return bool(b) and (b[0] & 0xC0) == 0x80


_SURROGATES = re.compile("([\udc80-\udcff]+)")
