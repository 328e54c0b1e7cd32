"""Stopping a `llama_decode` under way: llama.cpp's abort callback, asked after each node of the graph.

The callback is a Python function, so each call takes the GIL: it is set only for passes over
many tokens (a prompt's chunk, a wide tree), where one pass can take seconds and a call per
node costs nothing beside it, and cleared after. A decode it aborts returns 2 with the KV cache
partly written; the LM that ran it is then spent (`lm.LlamaCppLM`): its context is freed,
never given to another run.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import threading
from collections.abc import Callable, Iterator

from specviz.lm.interrupt import StopCheck

# Passes over fewer tokens run without the callback: they take a fraction of a second.
MIN_TOKENS = 32

_lock = threading.Lock()
_checks: dict[int, StopCheck] = {}  # per decode under way (its key): the run's stop check
_reasons: dict[int, str] = {}  # per decode aborted: why
_keys = itertools.count(1)
_callback = None  # one C function pointer for every context, kept alive here


def _should_abort(data) -> bool:
    key = int(data or 0)
    check = _checks.get(key)
    reason = check() if check is not None else ""
    if reason:
        _reasons[key] = reason
        return True
    return False


def _pointer(L):
    global _callback
    with _lock:
        if _callback is None:
            _callback = L.ggml_abort_callback(_should_abort)
        return _callback


@contextlib.contextmanager
def abortable(L, ctx, check: StopCheck | None, n_tokens: int) -> Iterator[Callable[[], str]]:
    """Around one `llama_decode` on `ctx`: aborted when `check()` names a reason (for passes of
    at least MIN_TOKENS tokens). Yields a function that says why it was aborted ("" if not)."""
    if check is None or n_tokens < MIN_TOKENS:
        yield lambda: ""
        return
    key = next(_keys)
    _checks[key] = check
    L.llama_set_abort_callback(ctx, _pointer(L), ctypes.c_void_p(key))
    try:
        yield lambda: _reasons.get(key, "")
    finally:
        L.llama_set_abort_callback(ctx, L.ggml_abort_callback(), None)
        _checks.pop(key, None)
        _reasons.pop(key, None)
