"""Each visitor's share of the queue, requests waiting or running at once: at most
`max_runs_per_visitor` that run a model (SPECVIZ_MAX_RUNS_PER_VISITOR), `max_light_per_visitor`
for the light handlers' slots (SPECVIZ_MAX_LIGHT_PER_VISITOR: fewer than the slots, so one
visitor never holds them all) and `max_events_per_visitor` of any kind (SPECVIZ_MAX_EVENTS_PER_VISITOR).

The check runs when a request asks to join the queue, for every queued event (the page's, the
API's, the MCP tools', private ones called by fn_index too: the light handlers, the models, the
labs, a trace's upload, the race replay), so one visitor can neither fill the queue nor hold
every light slot. It counts the visitor's requests in Gradio's queue, waiting or running; a
visitor's requests join one after another, so two sent at once are both counted. A refused
request gets Gradio's validation answer (HTTP 422), one line.

A visitor is a client address on a public page (`visitor_key`: the address the operator's
proxies saw, never one the client wrote; an MCP call counts as its caller), else a browser
session: every request of a local page comes from this machine, so there the session tells
visitors apart.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import gradio as gr

from specviz.app import visitor_key
from specviz.app.config import PageConfig
from specviz.app.tab import LIGHT, MODELS
from specviz.errors import UserError
from specviz.settings import PROMPT

MODELS_ID = MODELS["concurrency_id"]  # every model-running event's
LIGHT_ID = LIGHT["concurrency_id"]
ENV = "SPECVIZ_MAX_RUNS_PER_VISITOR"
LIGHT_ENV = "SPECVIZ_MAX_LIGHT_PER_VISITOR"
EVENTS_ENV = "SPECVIZ_MAX_EVENTS_PER_VISITOR"


def visitor(headers: Any, client_host: str | None, session_hash: str | None, config: PageConfig) -> str:
    """Who sent a request: see the module's docstring."""
    if not config.public:
        return f"session:{session_hash}"
    return visitor_key.of_headers(headers, client_host, config.trusted_hops)


def visitor_of(request: Any, session_hash: str | None, config: PageConfig) -> str:
    client = getattr(request, "client", None)
    return visitor(getattr(request, "headers", None), getattr(client, "host", None), session_hash, config)


def _outstanding(queue: Any) -> list[Any]:
    """Every event in `queue`, waiting or running."""
    waiting = [e for q in queue.event_queue_per_concurrency_id.values() for e in getattr(q, "queue", [])]
    return waiting + [e for job in queue.active_jobs if job for e in job]


def refusal(
    queue: Any, request: Any, session_hash: str | None, config: PageConfig, concurrency_id: str | None = MODELS_ID
) -> str | None:
    """Why a request from this visitor for `concurrency_id`'s slots may not join `queue` now, or None."""
    key = visitor_of(request, session_hash, config)
    mine = [e for e in _outstanding(queue) if visitor_of(e.request, e.session_hash, config) == key]
    shares = (
        (MODELS_ID, "model requests", config.max_runs_per_visitor, ENV),
        (LIGHT_ID, "light requests", config.max_light_per_visitor, LIGHT_ENV),
        (None, "requests", config.max_events_per_visitor, EVENTS_ENV),
    )
    for pool, what, limit, env in shares:
        if pool is None or pool == concurrency_id:
            n = sum(pool is None or e.concurrency_id == pool for e in mine)
            if n >= limit:
                return f"you have {n} {what} waiting or running; the limit is {limit} per visitor ({env})"
    return None


def oversized(data: Any) -> str | None:
    """Why a model request's inputs are refused as it joins the queue: a text longer than any
    prompt may be (the handler's own check would come only after the runs ahead of it)."""
    for value in data if isinstance(data, list) else []:
        if isinstance(value, str):
            try:
                PROMPT.chars.check_text(value, "the prompt")
            except UserError as e:
                return str(e)
    return None


def _mcp_refusals_in_one_line() -> None:
    """Gradio's MCP server calls a queued tool through a gradio_client on the loopback, and the
    caller reads what that client raises: a refusal at the queue's door worded as a count line
    and then one line per message. A single message is passed on as it is, in one line."""
    from gradio_client import utils

    words = utils.extract_validation_message
    if getattr(words, "one_line", False):
        return

    def one_line(req):
        text = words(req)
        lines = (text or "").splitlines()
        return lines[1].split(": ", 1)[-1] if len(lines) == 2 and lines[1].startswith("- ") else text

    one_line.one_line = True
    utils.extract_validation_message = one_line


def guard(demo: gr.Blocks, config: PageConfig) -> None:
    """Put `demo`'s queue (once `demo.queue()` has made it) under each visitor's share."""
    _mcp_refusals_in_one_line()
    queue = demo._queue
    join = queue.push
    locks: dict[str, asyncio.Lock] = {}
    users: Counter[str] = Counter()

    async def push(body, request, username):
        fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
        if fn is None:
            return await join(body=body, request=request, username=username)
        models = fn.concurrency_id == MODELS_ID

        def why_not() -> str | None:
            data = getattr(body, "data", None)
            return (oversized(data) if models else None) or refusal(
                queue, request, body.session_hash, config, fn.concurrency_id
            )

        # A visitor already at its share is refused at once, without waiting for its other joins.
        why = why_not()
        if why is None:
            key = visitor_of(request, body.session_hash, config)
            lock, users[key] = locks.setdefault(key, asyncio.Lock()), users[key] + 1
            try:
                async with lock:  # this visitor's requests join one at a time, each counting the ones before it
                    why = why_not()
                    if why is None:
                        return await join(body=body, request=request, username=username)
            finally:
                users[key] -= 1
                if not users[key]:
                    del users[key], locks[key]
        return False, [gr.validate(False, why)], "validator_error"

    queue.push = push
