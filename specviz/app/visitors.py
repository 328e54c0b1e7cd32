"""Each visitor's share of the models: at most `max_runs_per_visitor` model requests waiting
in the queue or running at once (SPECVIZ_MAX_RUNS_PER_VISITOR).

The check runs when a request asks to join the queue (a Gradio validator on every event that
runs a model: the page's, the API's, the MCP tools'), so one visitor cannot fill the queue
ahead of everyone else. It counts the visitor's requests in Gradio's queue, waiting or
running, and the ones admitted a moment ago that have not reached the queue yet.

A visitor is a client address on a public page (on a Hugging Face Space, the first address
its proxy forwards), else a browser session: every request of a local page comes from this
machine, so there the session tells visitors apart.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import gradio as gr

from specviz.app.config import PageConfig
from specviz.errors import UserError

MODELS_ID = "models"  # the concurrency id every model-running event shares (tab.MODELS)
IN_FLIGHT_S = 5.0  # an admitted request reaches the queue within this (else it was dropped)
ENV = "SPECVIZ_MAX_RUNS_PER_VISITOR"


def visitor(headers: Any, client_host: str | None, session_hash: str | None, config: PageConfig, space: bool) -> str:
    """Who sent a request: see the module's docstring."""
    if not config.public:
        return f"session:{session_hash}"
    forwarded = (headers.get("x-forwarded-for") or "").split(",")[0].strip() if space and headers is not None else ""
    return f"address:{forwarded or client_host}"


class Admission:
    """Admits a model request to the queue unless its visitor already has the limit outstanding."""

    def __init__(self, config: PageConfig, queue: Callable[[], Any], *, space: bool = False):
        """`queue`: Gradio's queue once the page has one; `space`: behind a Hugging Face Space's proxy."""
        self.config, self._queue, self._space = config, queue, space
        self._lock = threading.Lock()
        self._admitted: dict[str, list[float]] = {}  # by visitor: when each request was admitted

    def key(self, request: gr.Request | None) -> str:
        client = getattr(request, "client", None)
        return visitor(getattr(request, "headers", None), getattr(client, "host", None),
                       getattr(request, "session_hash", None), self.config, self._space)

    def admit(self, request: gr.Request | None) -> None:
        """Count the request against its visitor, or refuse it in one line."""
        key, limit = self.key(request), self.config.max_runs_per_visitor
        with self._lock:
            queued = self._queued(key)
            now = time.monotonic()
            # An admitted request is in `queued` once Gradio has queued it (its event is made after this check).
            recent = [t for t in self._admitted.get(key, []) if now - t < IN_FLIGHT_S]
            pending = [t for t in recent if not any(e >= t for e in queued)]
            outstanding = len(queued) + len(pending)
            if outstanding >= limit:
                raise UserError(f"you have {outstanding} model requests waiting or running; the limit is {limit} "
                                f"per visitor ({ENV})")
            self._admitted[key] = [*recent, now]
            for k in [k for k, ts in self._admitted.items() if all(now - t >= IN_FLIGHT_S for t in ts)]:
                del self._admitted[k]

    def _queued(self, key: str) -> list[float]:
        """When each of the visitor's model requests in the queue (waiting or running) was queued."""
        queue = self._queue()
        if queue is None:
            return []
        waiting = getattr(queue.event_queue_per_concurrency_id.get(MODELS_ID), "queue", [])
        running = [e for job in queue.active_jobs if job for e in job]
        return [e.enqueue_time for e in [*waiting, *running] if e.concurrency_id == MODELS_ID
                and visitor(e.request.headers if e.request else None, getattr(getattr(e.request, "client", None), "host", None),
                            e.session_hash, self.config, self._space) == key]

    def validator(self, n_inputs: int, n_outputs: int) -> Callable:
        """A Gradio validator for an event whose function takes `n_inputs` arguments from
        `n_outputs` components: it takes them (and ignores them) and the request, and refuses
        the event when its visitor is at the limit."""

        def validate(*args):
            try:
                self.admit(args[n_inputs] if len(args) > n_inputs else None)
                verdict = gr.validate(True, "")
            except UserError as e:
                verdict = gr.validate(False, str(e))
            # One verdict per input, as Gradio checks; a refusal on the first alone, so it reads as one line.
            return [verdict] + [gr.validate(True, "")] * (n_outputs - 1) if n_outputs != 1 else verdict

        P = inspect.Parameter
        params = [P(f"input_{i}", P.POSITIONAL_OR_KEYWORD) for i in range(n_inputs)]
        validate.__signature__ = inspect.Signature([*params, P("request", P.POSITIONAL_OR_KEYWORD, annotation=gr.Request)])
        validate.__annotations__ = {"request": gr.Request}
        return validate


def guard(demo: gr.Blocks, admission: Admission) -> int:
    """Put every model-running event of `demo` under `admission`; how many there are."""
    fns = [fn for fn in demo.fns.values() if fn.concurrency_id == MODELS_ID]
    for fn in fns:
        fn.validator = admission.validator(1 if fn.inputs_as_dict else len(fn.inputs), len(fn.inputs))
    return len(fns)
