"""A bound on the bytes of every request to the page, checked before the server reads the body.

Gradio reads a whole request body (a JSON of every input) before any handler can look at a
value, so a prompt of 100 MB would cost its parsing before `settings.check_prompt` refuses it.
Every request is refused at its Content-Length, or as soon as a body sent without one passes
the limit (HTTP 413, one line): SPECVIZ_MAX_REQUEST_BYTES, except on Gradio's file-upload route
(`UPLOAD`, matched exactly), which has its own bounds (`app/upload_bounds.py`): its bytes, its
files, each form field that is not a file, and a public page's visitor's uploads per minute.

Every request's visitor is named here too, once (`visitor_key.stamp`), for the queue's shares;
a public page closes the Gradio routes it does not use (`closed_routes`), counts each visitor's
refused requests and turns away one that has too many (`strikes`), before anything is read.
"""

from __future__ import annotations

import json
import time

from python_multipart.exceptions import MultipartParseError

from specviz.app import visitor_key
from specviz.app.closed_routes import closed
from specviz.app.config import PageConfig
from specviz.app.strikes import STATUSES, Strikes
from specviz.app.upload_bounds import FormCount, Uploads

ENV = "SPECVIZ_MAX_REQUEST_BYTES"
UPLOAD_ENV = "SPECVIZ_MAX_UPLOAD_BYTES"
# Gradio's file-upload route: its router's prefix (gradio.route_utils.API_PREFIX) and "/upload"
# (gradio/routes.py); any other path, /gradio_api/call/upload included, has the request limit.
UPLOAD = "/gradio_api/upload"


class RequestSize:
    """ASGI middleware: every request's body bounded, its visitor named (see the module's docstring)."""

    def __init__(
        self, app, config: PageConfig | None = None, max_bytes: int | None = None, strikes: Strikes | None = None
    ):
        self.app = app
        self.config = config or PageConfig(**({"max_request_bytes": max_bytes} if max_bytes else {}))
        self.uploads = Uploads(self.config.max_uploads_per_minute)
        self.strikes = strikes or Strikes.of(self.config)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        visitor = visitor_key.stamp(scope, self.config.trusted_hops)
        closed_door = self.strikes.door(visitor, scope["method"], time.monotonic())
        if closed_door is not None:
            why, wait_s = closed_door
            return await refuse(send, 429, why, [(b"retry-after", str(wait_s).encode())])

        async def counting(message):
            if message["type"] == "http.response.start" and message["status"] in STATUSES:
                self.strikes.strike(visitor, time.monotonic())
            await send(message)

        await self._checked(scope, receive, counting, visitor)

    async def _checked(self, scope, receive, send, visitor: str) -> None:
        why = closed(scope["path"]) if self.config.public else None
        if why is not None:
            self.strikes.strike(visitor, time.monotonic())
            return await refuse(send, 404, why)
        upload = scope["method"] == "POST" and scope["path"] == UPLOAD
        config = self.config
        limit, env = (config.max_upload_bytes, UPLOAD_ENV) if upload else (config.max_request_bytes, ENV)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            return await refuse(
                send, 413, f"the request is {int(length):,} bytes; the limit is {limit:,} bytes ({env})"
            )
        form = None
        if upload:
            why = self.uploads.admit(visitor, time.monotonic()) if config.public else None
            if why is not None:
                return await refuse(send, 429, why)
            form = FormCount(headers.get(b"content-type", b""), config)
        await self._bounded(scope, receive, send, limit, env, form)

    async def _bounded(self, scope, receive, send, limit: int, env: str, form: FormCount | None) -> None:
        """The app, reading a body that is refused once it passes `limit` or `form`'s bounds."""
        seen, refused, started = 0, False, False

        async def counted():
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect" and form is not None:
                raise UploadCut("the upload ended before its body did")
            body = message.get("body", b"")
            seen += len(body)
            why = (
                f"the request is more than {seen:,} bytes; the limit is {limit:,} bytes ({env})"
                if seen > limit
                else None
            )
            why = why or (form.feed(body) if form is not None else None)
            if why is None:
                return message
            refused = True
            if not started:
                await refuse(send, 413, why)
            if form is not None:
                raise UploadCut(why)
            return {"type": "http.disconnect"}  # the app stops reading; what it answers is dropped

        async def sending(message):
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except Exception:
            if not refused:
                raise


class UploadCut(MultipartParseError):
    """An upload cut off (refused, or its client gone): Gradio's upload parser, meeting a parse
    error, deletes the files it has begun writing, which it keeps on any other interruption."""


async def refuse(send, status: int, detail: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    """An answer of one line, before the app reads anything more."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
