"""Who sent a request on a public page: the address the operator's proxies saw, never one the
client wrote.

Each proxy in front of the page appends the address it received the request from to
X-Forwarded-For; whatever stands to the left of those entries the client wrote itself. With
`hops` trusted proxies (SPECVIZ_TRUSTED_HOPS: 1 on a Hugging Face Space, 0 elsewhere) the
visitor is the `hops`-th entry from the right; with 0, or a header shorter than that, it is the
address the connection came from.

The request-size middleware (`request_size`) names every request's visitor once, in a header
signed with a secret of this process (`HEADER`), and `visitors` reads it back: so a call the
page makes to itself on a visitor's behalf (Gradio's MCP server joins the queue through a
client on the loopback, with the MCP request's headers) counts as that visitor, and a header a
client forges fails its signature and is replaced.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

HEADER = "x-specviz-visitor"
_SECRET = secrets.token_bytes(32)


def address(forwarded: str | None, peer: str | None, hops: int) -> str:
    """The visitor's address: see the module's docstring."""
    entries = [e.strip() for e in (forwarded or "").split(",") if e.strip()]
    if hops > 0 and len(entries) >= hops:
        return entries[-hops][:64]
    return peer or "unknown"


def _mac(key: str) -> str:
    return hmac.new(_SECRET, key.encode(), hashlib.sha256).hexdigest()[:32]


def signed(key: str) -> str:
    return f"{_mac(key)} {key}"


def verified(value: str | None) -> str | None:
    """The visitor a signed header names, or None for a missing or forged one."""
    mac, _, key = (value or "").partition(" ")
    return key if key and hmac.compare_digest(mac, _mac(key)) else None


def of_headers(headers: Mapping[str, str] | None, peer: str | None, hops: int) -> str:
    """The visitor of a request: its signed header's, else its own address."""
    headers = headers or {}
    return verified(headers.get(HEADER)) or f"address:{address(headers.get('x-forwarded-for'), peer, hops)}"


def stamp(scope: dict, hops: int) -> str:
    """Name `scope`'s visitor in its signed header (a forged one replaced); return the visitor."""
    raw = scope.get("headers") or []
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
    # Several X-Forwarded-For lines read as one list, in order.
    headers["x-forwarded-for"] = ",".join(v.decode("latin-1") for k, v in raw if k.lower() == b"x-forwarded-for")
    client = scope.get("client")
    key = of_headers(headers, client[0] if client else None, hops)
    name = HEADER.encode()
    scope["headers"] = [(k, v) for k, v in raw if k.lower() != name] + [(name, signed(key).encode("latin-1"))]
    return key
