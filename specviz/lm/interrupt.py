"""Stopping a long pass from outside: a prompt's prefill goes in chunks, with the run's stop
check between them, so Stop and the wall-time limit end a run within one chunk.

The engine names the check for the thread that runs the models (`checked`); every LM's
`feed` reads it (`feed_in_chunks`), the target's and the draft's alike, so no drafter has to
pass it along. Without a check (the bench, a timing) a feed runs to its end as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import torch

# Tokens one torch pass takes while reading a prompt: a few seconds on a CPU at most.
CHUNK = 256

# () -> why the run must stop ("cancelled", "time_limit"), or "" to go on
StopCheck = Callable[[], str]

_local = threading.local()


class Interrupted(Exception):
    """The run's stop check said stop in the middle of a pass; the LM's cache is left
    partly written, so the run ends there (its LMs are not used again)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def checked(check: StopCheck | None) -> Iterator[None]:
    """While inside, passes on this thread stop between chunks when `check()` names a reason."""
    previous = getattr(_local, "check", None)
    _local.check = check
    try:
        yield
    finally:
        _local.check = previous


def current() -> StopCheck | None:
    """The stop check of the run on this thread, if any."""
    return getattr(_local, "check", None)


def check_now() -> None:
    """Raise Interrupted if the run on this thread must stop."""
    check = current()
    reason = check() if check is not None else ""
    if reason:
        raise Interrupted(reason)


def feed_in_chunks(
    one_pass: Callable[[torch.Tensor, int], torch.Tensor], ids: torch.Tensor, keep: int, chunk: int = CHUNK
) -> torch.Tensor:
    """`one_pass(ids, keep)` (an LM's feed: logits of the last `keep` positions, 0: all) over
    `ids` in chunks of `chunk` tokens, the run's stop check between them; the same rows one
    pass over all of `ids` returns."""
    n = ids.numel()
    if n <= chunk:
        return one_pass(ids, keep)
    first_kept = 0 if keep <= 0 else max(0, n - keep)
    rows = []
    for lo in range(0, n, chunk):
        if lo:
            check_now()
        hi = min(n, lo + chunk)
        kept = hi - max(lo, first_kept)
        if kept > 0:
            rows.append(one_pass(ids[lo:hi], 0 if kept == hi - lo else kept))
        else:
            one_pass(ids[lo:hi], 1)  # its logits are not wanted; one row is the cheapest to make
    return rows[0] if len(rows) == 1 else torch.cat(rows)
