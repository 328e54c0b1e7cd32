"""The run's grammar over the pair's tokenizer: which tokens it allows next, after the output so
far and after any path of drafted tokens past it, and which tokens it forces.

llguidance's matcher holds the state after the output so far. A question about a path past it
(a draft's next token, a tree node's children, a row of the target's pass) consumes the path,
asks, and rolls back: the state moves on only with `advance`, the tokens a round kept. Answers
are cached per path until then, so the drafter's mask at a position and the target's at the
same position are computed once.

Every stop token of the pair is an end-of-sequence token for the matcher: the grammar allows
them exactly where its text may end. After a stop token the run ends, and the row after it
allows every token (its bonus token, if drawn, is never kept).

The forced tokens are llguidance's fast-forward tokens: the bytes the grammar forces from
here, tokenized as the tokenizer would write them, without the last few bytes that could
still join the next token into a longer one (so `{"name": "` forces `{"`, `name`, `":` and
leaves ` "` to the model, which may write ` "` or ` "Bob`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import numpy as np
import torch

from specviz.errors import UserError
from specviz.grammar.formats import OutputFormat, engine_limits

Path = tuple[int, ...]


class Grammar:
    """The grammar of one run: `format` over a pair's `tokenizer` (its first `vocab_size`
    tokens), ending at any of `stop_ids`."""

    def __init__(self, fmt: OutputFormat, tokenizer, vocab_size: int, stop_ids: Sequence[int]):
        import llguidance

        self.format = fmt
        self.vocab_size = vocab_size
        self._stops = frozenset(int(s) for s in stop_ids)
        ll = engine_tokenizer(tokenizer, vocab_size, tuple(sorted(self._stops)))
        start = time.perf_counter()
        self._m = llguidance.LLMatcher(ll, fmt.engine_text, limits=engine_limits(), log_level=0)
        self.compile_ms = (time.perf_counter() - start) * 1000
        self._check()
        self._bits = np.zeros((vocab_size + 31) // 32, dtype=np.int32)
        self._masks: dict[Path, torch.Tensor] = {}
        self._forced: dict[Path, list[int]] = {}
        self.mask_ms = 0.0  # time spent computing masks and forced tokens (the grammar's cost)
        self.masks = 0

    def allowed(self, path: Sequence[int] = ()) -> torch.Tensor:
        """(V,) bool: the tokens allowed after the output so far and `path` (every token after a
        stop token; none after a token the grammar forbids)."""
        key = tuple(int(t) for t in path)
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = self._compute(key)
        return mask

    def rows(self, paths: Sequence[Sequence[int]]) -> torch.Tensor:
        """(n, V) bool: `allowed` for each path."""
        return torch.stack([self.allowed(p) for p in paths])

    def forced(self, path: Sequence[int] = ()) -> list[int]:
        """The tokens the grammar forces after the output so far and `path` (none after a stop token)."""
        key = tuple(int(t) for t in path)
        if key not in self._forced:
            start = time.perf_counter()
            self._forced[key] = self._at(key, self._m.compute_ff_tokens, [])
            self.mask_ms += (time.perf_counter() - start) * 1000
        return self._forced[key]

    def ends(self, token: int) -> bool:
        return int(token) in self._stops

    def advance(self, tokens: Sequence[int]) -> None:
        """The output grew by `tokens` (each allowed in turn; a stop token ends it)."""
        kept = [int(t) for t in tokens]
        if any(self.ends(t) for t in kept):
            kept = kept[: next(i for i, t in enumerate(kept) if self.ends(t))]
        if kept and not self._m.consume_tokens(kept):
            raise UserError(f"the output left its grammar: {self._m.get_error()}")
        self._masks.clear()
        self._forced.clear()

    def _compute(self, key: Path) -> torch.Tensor:
        if any(self.ends(t) for t in key):
            return torch.ones(self.vocab_size, dtype=torch.bool)
        start = time.perf_counter()
        ok = self._at(key, lambda: self._m.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes) or True)
        self._check()
        bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little")[: self.vocab_size]
        mask = torch.from_numpy(bits.astype(bool)) if ok else torch.zeros(self.vocab_size, dtype=torch.bool)
        self.mask_ms += (time.perf_counter() - start) * 1000
        self.masks += 1
        return mask

    def _at(self, key: Path, ask, otherwise=None):
        """`ask()` in the state after `key`, the matcher rolled back after; `otherwise` where
        the grammar forbids the path or it passes a stop token."""
        if any(self.ends(t) for t in key):
            return otherwise
        took = self._m.try_consume_tokens(list(key)) if key else 0
        try:
            return ask() if took == len(key) else otherwise
        finally:
            if took:
                self._m.rollback(took)

    def _check(self) -> None:
        if self._m.is_error():
            raise UserError(f"the output format is too complex for the limits here: {self._m.get_error()[:300]}")


@functools.lru_cache(maxsize=8)
def _tokenizers(key: tuple) -> object:
    tokenizer, vocab_size, stops = key[0]._tokenizer, key[1], list(key[2])
    import llguidance.hf

    try:
        return llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=stops)
    except ValueError as e:  # llguidance reads fast (Rust) tokenizers only
        raise UserError(f"output formats need the pair's tokenizer as a fast tokenizer: {e}") from None


class _Keyed:
    """A tokenizer as a cache key, by identity (its vocabulary is large and read once per object)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __hash__(self) -> int:
        return id(self._tokenizer)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Keyed) and other._tokenizer is self._tokenizer


def engine_tokenizer(tokenizer, vocab_size: int, stops: tuple[int, ...]):
    """llguidance's tokenizer for a transformers one (about two seconds for a 150k vocabulary,
    so made once per tokenizer object, vocabulary size and stop tokens)."""
    return _tokenizers((_Keyed(tokenizer), vocab_size, stops))


def run_grammar(settings, tokenizer, vocab_size: int, stop_ids) -> Grammar | None:
    """The grammar of a run with these settings (None for free text)."""
    from specviz.grammar.formats import parse

    fmt = parse(settings.output_format, settings.output_spec)
    return None if fmt is None else Grammar(fmt, tokenizer, vocab_size, sorted(stop_ids))
