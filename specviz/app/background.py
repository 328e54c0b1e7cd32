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


def newest(
    items: Iterator[T], *, min_interval_s: float | Callable[[T], float], stop: Callable[[], None]
) -> Iterator[T]:
    """Iterate `items` in a thread of its own and yield the newest one, at most one every
    `min_interval_s` (or that function of the item last yielded), the first at once and the
    last always. An exception in the thread is raised here, after the newest item before it.
    Closing this iterator early calls `stop()` (which must make `items` end soon) and returns
    without waiting for the thread; what the run yields after that is dropped."""
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
    wait = 0.0  # after the update sent last
    try:
        while True:
            with cond:
                cond.wait_for(lambda: box["fresh"] or box["done"])
                if sent is not None and not box["done"]:
                    # Not sooner than min_interval_s after the last update, unless the run ends.
                    due = sent + wait
                    cond.wait_for(
                        lambda: box["done"] or time.monotonic() >= due, timeout=max(0.0, due - time.monotonic())
                    )
                item, fresh, done, error = box["item"], box["fresh"], box["done"], box["error"]
                box["fresh"] = False
            if fresh:
                sent = time.monotonic()
                wait = min_interval_s(item) if callable(min_interval_s) else min_interval_s
                yield item
            if error is not None:
                raise error
            if done:
                return
    finally:
        if thread.is_alive():
            stop()


# A reader that leaves an update unread this long has gone (a job posted to /call/<api> and never
# read): its run is stopped.
UNREAD_S = 20.0
_NOTHING = object()


def unread(request) -> Callable[[], int]:
    """How many messages for `request`'s session wait unread in Gradio's queue. A page or a
    client streaming the job takes them as they come; a job posted to /call/<api> that nobody
    reads keeps every one queued until it is read or the process ends."""
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


def reads_only_the_result(request) -> bool:
    """Whether `request` is an MCP tool call: Gradio's MCP server calls the endpoint through a
    client of its own (marked `x-gradio-user: mcp`) that keeps every streamed message until
    the call ends and hands the MCP caller the last one alone."""
    headers = getattr(request, "headers", None)
    try:
        return headers is not None and headers.get("x-gradio-user") == "mcp"
    except AttributeError:
        return False


def while_read(
    updates: Iterator[T],
    unread_now: Callable[[], int],
    *,
    only_last: bool = False,
    unread_s: float = UNREAD_S,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[T]:
    """`updates` (each the whole run so far) as fast as a reader takes them, so that what waits
    for it is one update, never every one: an update is sent only when none waits unread
    (`unread`), else held in place of the one held before; the last always goes. With
    `only_last` (an MCP call, `reads_only_the_result`) the last alone goes. An update left
    unread for `unread_s` means the reader has gone: `updates` is closed, which stops its run
    (a generator of `newest`'s), and nothing more is sent."""
    held: object = _NOTHING
    waiting_since: float | None = None
    try:
        for update in updates:
            if unread_now() > 0:
                waiting_since = clock() if waiting_since is None else waiting_since
                if clock() - waiting_since > unread_s:
                    return
                held = update
                continue
            waiting_since = None
            if only_last:
                held = update
                continue
            held = _NOTHING
            yield update
        if held is not _NOTHING:
            yield held  # type: ignore[misc]
    finally:
        close = getattr(updates, "close", None)
        if close is not None:
            close()
