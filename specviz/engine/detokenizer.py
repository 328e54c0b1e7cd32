"""Token ids to text, one token at a time, with multi-byte characters kept whole.

A byte-level tokenizer can split one character (an accent, a CJK character, an emoji) over
several tokens; decoding such a token alone gives U+FFFD. The detokenizer decodes a short
window and holds text back while it ends in an incomplete character, so each token's text
is what it adds to the decoded output and the pieces join to exactly the whole text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

REPLACEMENT = "\ufffd"


class Detokenizer:
    """Incremental decoding of the new tokens (special tokens such as EOS decode to "")."""

    def __init__(self, tokenizer: Any):
        self._tok = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # window start: a clean character boundary before `_read`
        self._read = 0  # tokens up to here have been turned into text
        self.text = ""

    def push(self, token_id: int) -> str:
        """Append a token and return the text it adds (possibly "" while a character is incomplete)."""
        piece, self._prefix, self._read = self._step(self._ids, self._prefix, self._read, token_id)
        self._ids.append(token_id)
        self.text += piece
        return piece

    def peek(self, token_ids: list[int]) -> list[str]:
        """The texts `token_ids` would get if pushed after the current tokens, without pushing them."""
        ids, prefix, read, out = list(self._ids), self._prefix, self._read, []
        for t in token_ids:
            piece, prefix, read = self._step(ids, prefix, read, t)
            ids.append(t)
            out.append(piece)
        return out

    def flush(self) -> str:
        """Text still held back at the end (an incomplete character decodes as U+FFFD)."""
        done = self._decode(self._ids[self._prefix : self._read])
        rest = self._decode(self._ids[self._prefix :])[len(done) :]
        self._read = self._prefix = len(self._ids)
        self.text += rest
        return rest

    def _step(self, ids: list[int], prefix: int, read: int, token_id: int) -> tuple[str, int, int]:
        done = self._decode(ids[prefix:read])
        full = self._decode(ids[prefix:] + [token_id])
        if len(full) > len(done) and not full.endswith(REPLACEMENT):
            return full[len(done) :], read, len(ids) + 1
        return "", prefix, read

    def _decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False) if ids else ""


class TokenTexts:
    """Standalone text of single tokens (for the top-token lists), memoised per tokenizer."""

    def __init__(self, tokenizer: Any):
        self._tok = tokenizer
        self._one = lru_cache(maxsize=65536)(self._decode_one)

    def __call__(self, token_id: int) -> str:
        return self._one(token_id)

    def _decode_one(self, token_id: int) -> str:
        return self._tok.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
