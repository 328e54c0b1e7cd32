"""Each visitor's share of the models: at most `max_runs_per_visitor` model requests waiting
in the queue or running at once (SPECVIZ_MAX_RUNS_PER_VISITOR).

The check runs when a request asks to join the queue, for every event that runs a model (the
page's, the API's, the MCP tools', private ones called by fn_index too), so one visitor cannot
fill the queue ahead of everyone else. It counts the visitor's model requests in Gradio's
queue, waiting or running; a visitor's requests join one after another, so two sent at once
are both counted. A refused request gets Gradio's validation answer (HTTP 422), one line.

A visitor is a client address on a public page (on a Hugging Face Space, the first address
its proxy forwards), else a browser session: every request of a local page comes from this
machine, so there the session tells visitors apart.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import gradio as gr

from specviz.app.config import PageConfig
from specviz.app.tab import MODELS
from specviz.errors import UserError
from specviz.settings import PROMPT

MODELS_ID = MODELS["concurrency_id"]  # every model-running event's
ENV = "SPECVIZ_MAX_RUNS_PER_VISITOR"


def visitor(headers: Any, client_host: str | None, session_hash: str | None, config: PageConfig) -> str:
    """Who sent a request: see the module's docstring."""
    if not config.public:
        return f"session:{session_hash}"
    forwarded = (headers.get("x-forwarded-for") or "").split(",")[0].strip() if config.space and headers else ""
    return f"address:{forwarded or client_host}"


def _visitor_of(request: Any, session_hash: str | None, config: PageConfig) -> str:
    client = getattr(request, "client", None)
    return visitor(getattr(request, "headers", None), getattr(client, "host", None), session_hash, config)


def refusal(queue: Any, request: Any, session_hash: str | None, config: PageConfig) -> str | None:
    """Why a model request from this visitor may not join `queue` now, or None."""
    key, limit = _visitor_of(request, session_hash, config), config.max_runs_per_visitor
    waiting = getattr(queue.event_queue_per_concurrency_id.get(MODELS_ID), "queue", [])
    running = [e for job in queue.active_jobs if job for e in job]
    outstanding = sum(
        1
        for e in [*waiting, *running]
        if e.concurrency_id == MODELS_ID and _visitor_of(e.request, e.session_hash, config) == key
    )
    if outstanding < limit:
        return None
    return f"you have {outstanding} model requests waiting or running; the limit is {limit} per visitor ({ENV})"


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


def guard(demo: gr.Blocks, config: PageConfig) -> None:
    """Put `demo`'s queue (once `demo.queue()` has made it) under each visitor's share."""
    queue = demo._queue
    join = queue.push
    locks: dict[str, asyncio.Lock] = {}
    users: Counter[str] = Counter()

    async def push(body, request, username):
        fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
        if fn is None or fn.concurrency_id != MODELS_ID:
            return await join(body=body, request=request, username=username)
        key = _visitor_of(request, body.session_hash, config)
        lock, users[key] = locks.setdefault(key, asyncio.Lock()), users[key] + 1
        try:
            async with lock:  # this visitor's requests join one at a time, each counting the ones before it
                why = oversized(getattr(body, "data", None)) or refusal(queue, request, body.session_hash, config)
                if why is not None:
                    return False, [gr.validate(False, why)], "validator_error"
                return await join(body=body, request=request, username=username)
        finally:
            users[key] -= 1
            if not users[key]:
                del users[key], locks[key]

    queue.push = push
