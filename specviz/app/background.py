"""A run in a thread of its own; the page takes the newest trace whenever it is ready for one.

Gradio pulls a handler's next update only after it has sent the last one, so a run iterated
by the handler itself would wait for every update to be built, serialised and sent before
its next token, and run slower on the page than in-process (docs/BENCHMARKS.md, "Figures
behind the code"). Here the engine runs on while the page draws, and updates that come faster than the page takes them
are merged into the newest one (each trace holds the whole run so far, so nothing is lost).

Closing the iterator (Stop, a client gone, a new run in the session) tells the run to stop
and returns at once: it runs inside Gradio's event loop, which must not wait for a pass to
end. The run stops at its next check (between rounds, between a prompt's chunks, inside a
long llama.cpp pass) and leaves the models to the next run only then (`engine.model_lock`).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def newest(items: Iterator[T], *, min_interval_s: float, stop: Callable[[], None]) -> Iterator[T]:
    """Iterate `items` in a thread of its own and yield the newest one, at most one every
    `min_interval_s`, the first at once and the last always. An exception in the thread is
    raised here, after the newest item before it. Closing this iterator early calls `stop()`
    (which must make `items` end soon) and returns without waiting for the thread; what the
    run yields after that is dropped."""
    cond = threading.Condition()
    box: dict = {"item": None, "fresh": False, "done": False, "error": None}

    def pump() -> None:
        try:
            for item in items:
                with cond:
                    box["item"], box["fresh"] = item, True
                    cond.notify()
        except BaseException as e:  # handed to the consumer, which raises it
            with cond:
                box["error"] = e
        finally:
            with cond:
                box["done"] = True
                cond.notify()

    # contextvars travel with the run (ZeroGPU's wrapper reads the request from them).
    thread = threading.Thread(target=contextvars.copy_context().run, args=(pump,), name="specviz-run", daemon=True)
    thread.start()
    sent: float | None = None
    try:
        while True:
            with cond:
                cond.wait_for(lambda: box["fresh"] or box["done"])
                if sent is not None and not box["done"]:
                    # Not sooner than min_interval_s after the last update, unless the run ends.
                    due = sent + min_interval_s
                    cond.wait_for(
                        lambda: box["done"] or time.monotonic() >= due, timeout=max(0.0, due - time.monotonic())
                    )
                item, fresh, done, error = box["item"], box["fresh"], box["done"], box["error"]
                box["fresh"] = False
            if fresh:
                sent = time.monotonic()
                yield item
            if error is not None:
                raise error
            if done:
                return
    finally:
        if thread.is_alive():
            stop()


# Updates an API client may leave unread before its run counts as abandoned: at most five a
# second go out (runner.MIN_UPDATE_S), so this is a client that has not read for about 20 s.
UNREAD_LIMIT = 100


def unread(request) -> Callable[[], int]:
    """How many messages for `request`'s session wait unread in Gradio's queue. A page or a
    client streaming the job takes them as they come; a job posted to /call/<api> that nobody
    reads keeps every one (each the whole trace so far) until the process ends."""
    try:
        queue = request.request.app.get_blocks()._queue
        session = request.session_hash
        queue.pending_messages_per_session
    except AttributeError:  # not served by Gradio's queue (a test, a direct call)
        return lambda: 0

    def count() -> int:
        pending = queue.pending_messages_per_session.get(session)
        return pending.qsize() if pending is not None else 0

    return count


def while_read(updates: Iterator[T], unread_now: Callable[[], int], *, limit: int = UNREAD_LIMIT) -> Iterator[T]:
    """`updates` until more than `limit` of them wait unread (`unread`): then `updates` is
    closed, which stops its run (a generator of `newest`'s), and nothing more is queued."""
    try:
        for update in updates:
            if unread_now() > limit:
                return
            yield update
    finally:
        close = getattr(updates, "close", None)
        if close is not None:
            close()
