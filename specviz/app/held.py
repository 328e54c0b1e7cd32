"""The memory that uploaded traces hold, all sessions together, kept under one bound.

A session keeps its current trace for hours (`page.STATE_TTL_S`), and an uploaded one costs
more memory than its file: every number, text and list becomes a Python object. The trace's
schema bounds the file (`events.MAX_TRACE_BYTES`, its containers and each part), so an upload
costs at most `PER_BYTE` times its file's bytes once loaded (docs/PUBLIC.md: the largest legal
uploads, measured). Each upload is counted at that cost from before it is read until the trace
is dropped (its session ends, expires or holds another trace); one that would take the total
past `UPLOADS_MEMORY` is refused in one line, before it is read. Uploads are read one at a time,
so the memory a trace needs while it is parsed is needed once.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager

from specviz.limits import UPLOADS_MEMORY

PER_BYTE = 13  # the most memory a loaded trace holds per byte of its file, rounded up

_lock = threading.Lock()  # guards `_held`
_reading = threading.Lock()  # one upload parsed at a time
_held = {"bytes": 0}


def held_bytes() -> int:
    """What the uploaded traces alive now are counted at, together."""
    return _held["bytes"]


def _release(n: int) -> None:
    with _lock:
        _held["bytes"] -= n


@contextmanager
def counted(file_bytes: int):
    """Read an upload of `file_bytes` inside: refused (LimitError) where its cost would take the
    uploads past their bound; else its cost counted while it is read, and for as long as the
    trace it yields to `keep` lives."""
    cost = PER_BYTE * file_bytes
    with _lock:
        total = _held["bytes"] + cost
        UPLOADS_MEMORY.check(total, f"the memory of uploaded traces with this one ({file_bytes:,} bytes of file)")
        _held["bytes"] = total
    kept = []
    try:
        with _reading:
            yield kept.append
    finally:
        if kept:
            weakref.finalize(kept[0], _release, cost)
            kept.clear()  # the caller's `keep` must not keep the trace alive
        else:
            _release(cost)
