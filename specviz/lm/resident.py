"""The loaded pairs of this process, and unloading them: on request (`unload`, `unload_others`)
or, least recently used first, when the loaded models hold more than the budget.

Each runtime's loader keeps its pairs in a `Pairs` table, which registers a pair it loads
with what it holds and how to free it (the torch loader drops its models from its caches;
llama.cpp frees its models and idle contexts, a model still running a pass going when that
pass gives its context back). A pair some run
is using (`using`) is never unloaded by the budget or by `unload_others`.

SPECVIZ_MODELS_BUDGET_BYTES   bytes the loaded models may hold before the least recently used
                              idle pairs are unloaded (default: the memory budget of
                              models.memory, 90% of RAM or SPECVIZ_MEMORY_BUDGET_GB)
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from specviz.errors import UserError

log = logging.getLogger(__name__)

ENV = "SPECVIZ_MODELS_BUDGET_BYTES"


@dataclass
class _Entry:
    pair: Any
    nbytes: int
    forget: Callable[[], None]  # drop the pair from its loader's caches and free what it holds
    used: float
    users: int = 0


_lock = threading.RLock()
_entries: dict[int, _Entry] = {}  # by id(pair)


def budget_bytes(env=os.environ) -> int:
    text = (env.get(ENV) or "").strip()
    if not text:
        import torch

        from specviz.models.memory import budget

        return budget(torch.device("cpu"))[0]
    try:
        value = int(float(text))
    except ValueError:
        raise UserError(f"{ENV} must be a number of bytes (got {text!r})") from None
    if value <= 0:
        raise UserError(f"{ENV} is {text}; it must be a positive number of bytes")
    return value


class Pairs:
    """A runtime loader's pairs, one per key, each registered here when loaded: a request for
    a key being loaded waits for that load (`lock`, which the loader's own tables may share);
    unloading a pair takes it out of `table`, then `free(pair)` releases what it held."""

    def __init__(self, free: Callable[[Any], None]):
        self.lock = threading.RLock()
        self.table: dict[tuple, Any] = {}
        self._free = free

    def get(self, key: tuple, load: Callable[[], tuple[Any, int]]) -> Any:
        """The pair under `key`, `load()` -> (pair, bytes it holds) where there is none."""
        pair = self.table.get(key)  # a loaded pair does not wait for another one's load
        if pair is None:
            with self.lock:
                pair = self.table.get(key)
                if pair is None:
                    pair, nbytes = load()
                    self.table[key] = pair
                    register(pair, nbytes, lambda: self._forget(key, pair))
        return pair

    def _forget(self, key: tuple, pair: Any) -> None:
        with self.lock:
            if self.table.get(key) is pair:
                del self.table[key]
        self._free(pair)


def register(pair: Any, nbytes: int, forget: Callable[[], None]) -> None:
    """A pair just loaded; then the least recently used others go while over the budget."""
    with _lock:
        _entries[id(pair)] = _Entry(pair, int(nbytes), forget, time.monotonic())
        make_room(0, keep=pair)


def loaded() -> list[tuple[str, str, int, bool]]:
    """(name, runtime, bytes, in use) of each loaded pair, most recently used first."""
    with _lock:
        entries = sorted(_entries.values(), key=lambda e: -e.used)
        return [(e.pair.name, e.pair.runtime, e.nbytes, e.users > 0) for e in entries]


def held_bytes() -> int:
    with _lock:
        return sum(e.nbytes for e in _entries.values())


@contextlib.contextmanager
def using(pair: Any) -> Iterator[None]:
    """While a run uses `pair`: it counts as recently used and is not unloaded."""
    with _lock:
        entry = _entries.get(id(pair))
        if entry is not None:
            entry.users += 1
            entry.used = time.monotonic()
    try:
        yield
    finally:
        if entry is not None:
            with _lock:
                entry.users -= 1
                entry.used = time.monotonic()
        release_idle()


def release_idle(older_than_s: float | None = None) -> int:
    """Free the idle llama.cpp contexts (each with its whole KV cache) of every loaded pair
    that have gone unused for `older_than_s` (default: each model's own idle time); how many."""
    with _lock:
        models = [m for e in _entries.values() for m in (e.pair.target, e.pair.draft) if hasattr(m, "release_idle")]
    if not models:
        return 0
    return sum(m.release_idle() if older_than_s is None else m.release_idle(older_than_s) for m in models)


def unload(pair: Any, *, force: bool = False) -> bool:
    """Unload `pair` (not while a run uses it, unless `force`); whether it was unloaded."""
    with _lock:
        entry = _entries.get(id(pair))
        if entry is None or (entry.users and not force):
            return False
        del _entries[id(pair)]
    _forget(entry)
    return True


def unload_others(keep: Any = None) -> list[str]:
    """Unload every pair but `keep` that no run is using; the names of those left in use."""
    with _lock:
        others = [e for e in _entries.values() if e.pair is not keep]
    busy = [e.pair.name for e in others if not unload(e.pair)]
    return busy


def make_room(need: int, *, keep: Any = None) -> None:
    """Unload idle pairs, least recently used first, until `need` more bytes fit the budget."""
    limit = budget_bytes()
    with _lock:
        idle = sorted((e for e in _entries.values() if not e.users and e.pair is not keep), key=lambda e: e.used)
    for entry in idle:
        if held_bytes() + need <= limit:
            return
        log.info(
            "unloading %s (%s, %d bytes): the loaded models are over %s",
            entry.pair.name,
            entry.pair.runtime,
            entry.nbytes,
            ENV,
        )
        unload(entry.pair)


def drop(pair: Any) -> None:
    """Stop tracking `pair` without unloading it (its loader forgot it by itself)."""
    with _lock:
        _entries.pop(id(pair), None)


def _forget(entry: _Entry) -> None:
    entry.pair.closed = True
    try:
        entry.forget()
    finally:
        collect()


# Whether settle_heap has frozen the heap: an unload must then unfreeze it to free its pair's cycles.
_settled = False


def settle_heap() -> None:
    """Collect once, then keep what is alive now (the imports, the page, the pairs loaded) out of
    the cycle collector's sight (`gc.freeze`). A full collection walks the whole heap holding the
    GIL, and the objects a load leaves behind set off several in a page's first run, each
    stalling its passes. The page calls it once built and after each load; unfreezing first
    lets the collection free what an unloaded pair left in cycles."""
    global _settled
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _settled = True


def collect() -> None:
    """Free what unloaded pairs left in cycles, frozen ones too where the heap was settled."""
    if _settled:
        settle_heap()
    else:
        gc.collect()
