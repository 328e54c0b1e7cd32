"""One pass of the models at a time in this process.

Held by the thread that runs the models, around each of a run's passes (the prefill, a
round), not by the page's handler: a run whose page request has gone (Stop, a closed tab)
may still be finishing its pass in its own thread, and the next run's first pass waits for
it instead of overlapping it. The wait is bounded and ends early on the waiting run's own Stop.

SPECVIZ_MODEL_WAIT_S   seconds a pass waits for another run's pass before giving up (60)
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

from specviz.errors import UserError
from specviz.lm.interrupt import Interrupted, StopCheck

ENV = "SPECVIZ_MODEL_WAIT_S"
DEFAULT_WAIT_S = 60.0
POLL_S = 0.1  # how often a waiting run looks at its own stop check

# Re-entrant: a pass that runs another model function on the same thread does not wait for itself.
_lock = threading.RLock()


def wait_s(env=os.environ) -> float:
    text = env.get(ENV) or str(DEFAULT_WAIT_S)
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{ENV} must be a number of seconds (got {text!r})") from None
    if not 0 < value <= 3600:
        raise UserError(f"{ENV} is {text}; it must be more than 0 and at most 3600 seconds")
    return value


@contextlib.contextmanager
def models(stop: StopCheck | None = None, *, wait: float | None = None) -> Iterator[None]:
    """Hold the models for one pass. Raises Interrupted when `stop()` names a reason while
    waiting, UserError (one line) when another pass still holds them after `wait` seconds."""
    wait = wait_s() if wait is None else wait
    deadline = time.monotonic() + wait
    while not _lock.acquire(timeout=min(POLL_S, max(0.0, deadline - time.monotonic()))):
        reason = stop() if stop is not None else ""
        if reason:
            raise Interrupted(reason)
        if time.monotonic() >= deadline:
            raise UserError(f"the models were still busy with another run after {wait:g} s ({ENV}); try again")
    try:
        yield
    finally:
        _lock.release()
