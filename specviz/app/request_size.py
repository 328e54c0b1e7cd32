"""A bound on the bytes of one request to the page, checked before the server reads the body.

Gradio reads a whole request body (a JSON of every input) before any handler can look at a
value, so a prompt of 100 MB would cost its parsing before `settings.check_prompt` refuses it.
Every POST but a file upload (bounded by Gradio's `max_file_size`) is refused at its
Content-Length, or as soon as a body sent without one passes the limit (HTTP 413, one line).
"""

from __future__ import annotations

import json

ENV = "SPECVIZ_MAX_REQUEST_BYTES"
UPLOAD = "/upload"  # Gradio's file uploads: max_file_size bounds them


class RequestSize:
    """ASGI middleware: a POST's body is at most `max_bytes`."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].rstrip("/").endswith(UPLOAD):
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await self._refuse(send, int(length))
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise TooLarge(seen)
            return message

        try:
            await self.app(scope, counted, send)
        except TooLarge as e:
            await self._refuse(send, e.args[0], more=True)

    async def _refuse(self, send, n: int, *, more: bool = False) -> None:
        what = f"more than {n:,}" if more else f"{n:,}"
        detail = f"the request is {what} bytes; the limit is {self.max_bytes:,} bytes ({ENV})"
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class TooLarge(Exception):
    pass
