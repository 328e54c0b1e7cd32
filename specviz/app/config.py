"""What the page is launched with, read from the environment once at start-up, in one place.

    GRADIO_SERVER_NAME / GRADIO_SERVER_PORT or PORT   where to listen (127.0.0.1:7860)
    SPECVIZ_DEFAULT_PAIR       the pair selected and preloaded (the bundled qwen-coder; on a GPU,
                               ZeroGPU's included, qwen-coder-7b: see `default_pair_here`)
    SPECVIZ_PRELOAD=0          do not start loading the default pair at launch
    SPECVIZ_PUBLIC             1: the page is public (`public`, below); 0: it is not. Default: 1
                               on a Hugging Face Space (SPACE_ID set) or when bound beyond this machine
    SPECVIZ_PAIRS              on a public page, the presets a visitor may choose, comma-separated
                               (default: the default pair alone)
    SPECVIZ_ALLOW_CUSTOM_MODELS=0   offer only the presets (models refuses the rest too); the
                               default is 0 on a Hugging Face Space, else 1. A public page never
                               loads what a visitor types, only its pairs.
    SPECVIZ_MAX_WALL_S         stop any one run after this many seconds (300; above 0)
    SPECVIZ_QUEUE_SIZE         requests that may wait in the queue (32)
    SPECVIZ_MAX_REQUEST_BYTES  bytes of one request's body, file uploads aside (16 MB): larger ones are
                               refused before the server reads them (app/request_size.py)
    SPECVIZ_MAX_UPLOAD_BYTES   bytes of one request to Gradio's file-upload route (a trace's limit
                               and 64 KiB for the form around it); SPECVIZ_MAX_UPLOAD_FILES files in
                               it (4), SPECVIZ_MAX_UPLOAD_FIELD_BYTES bytes of each field that is
                               not a file (1,024); SPECVIZ_MAX_UPLOADS_PER_MINUTE uploads per
                               visitor of a public page (12)
    SPECVIZ_MAX_RUNS_PER_VISITOR   model requests one visitor may have waiting or running (2); a
                               visitor is a client address on a public page, else a browser session
    SPECVIZ_MAX_LIGHT_PER_VISITOR  requests for the light handlers' slots (the labs, drawing, replays,
                               the tools that run no model) one visitor may have waiting or running (3:
                               fewer than their 4 slots, so one visitor never holds them all)
    SPECVIZ_MAX_EVENTS_PER_VISITOR requests of any kind one visitor may have waiting or running (8)
    SPECVIZ_TRUSTED_HOPS       proxies in front of the page whose X-Forwarded-For entries name the
                               visitor (1 on a Hugging Face Space, else 0: the connection's address)
    SPECVIZ_MAX_SESSIONS       sessions whose page state is kept (256): Gradio keeps a copy of the
                               page's settings per session (every browser tab, API client and raw
                               API call) until this many newer ones push it out
    SPECVIZ_MEMORY_TRIM=0      do not hand freed heap memory back to the system (app/memory_trim.py;
                               for measuring what that does)
    SPECVIZ_MCP=0              do not serve the page's tools as an MCP server (app/tools.py) at
                               /gradio_api/mcp/ (false, no and off work too)

A public page loads only its pairs, on the runtime the operator chose (`auto`), one pair at
a time; it loads no path or Hub id a visitor types; its errors carry no server details.
A bad value stops the launch with one line naming the variable, the value and what it must be.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from specviz.errors import UserError
from specviz.events import MAX_TRACE_BYTES
from specviz.models.catalogue.presets import DEFAULT_PAIR, GPU_DEFAULT_PAIR, PRESETS
from specviz.models.catalogue.sources import custom_allowed
from specviz.settings import PROMPT
from specviz.yes_no import NO, YES, yes_no

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class PageConfig:
    host: str = "127.0.0.1"
    port: int = 7860
    default_pair: str = DEFAULT_PAIR
    preload: bool = True
    allow_custom: bool = True
    max_wall_s: float = 300.0
    queue_size: int = 32
    # Gradio's own default, 10000, lets a long-running page's memory grow with every session it keeps.
    max_sessions: int = 256
    mcp: bool = True
    public: bool = False
    pairs: tuple[str, ...] = ()  # a public page's presets besides the default pair
    max_runs_per_visitor: int = 2
    space: bool = False  # on a Hugging Face Space (SPACE_ID set): behind its proxy
    max_request_bytes: int = 16_000_000
    max_light_per_visitor: int = 3
    max_events_per_visitor: int = 8
    trusted_hops: int = 0  # see app/visitor_key.py
    max_upload_bytes: int = MAX_TRACE_BYTES + 65_536
    max_upload_files: int = 4
    max_upload_field_bytes: int = 1_024
    max_uploads_per_minute: int = 12
    max_refused_per_minute: int = 12  # see app/strikes.py; 0: no door
    memory_trim: bool = True

    @property
    def local_only(self) -> bool:
        """Whether only this machine can reach the page."""
        return self.host in LOOPBACK

    @property
    def public_pairs(self) -> tuple[str, ...]:
        """The pairs a visitor of a public page may load."""
        return (self.default_pair, *(p for p in self.pairs if p != self.default_pair))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "PageConfig":
        env = os.environ if env is None else env
        for limit in (PROMPT.chars, PROMPT.messages):  # read when checked; a bad value stops the launch here
            limit.read(env)
        host = env.get("GRADIO_SERVER_NAME") or "127.0.0.1"
        public = _flag(env, "SPECVIZ_PUBLIC", bool(env.get("SPACE_ID")) or host not in LOOPBACK)
        return cls(
            host=host,
            port=_whole(env, "GRADIO_SERVER_PORT", _whole(env, "PORT", 7860)),
            default_pair=env.get("SPECVIZ_DEFAULT_PAIR") or default_pair_here(),
            preload=_flag(env, "SPECVIZ_PRELOAD", True),
            allow_custom=custom_allowed(env) and not public,
            max_wall_s=_seconds(env, "SPECVIZ_MAX_WALL_S", 300.0),
            queue_size=_whole(env, "SPECVIZ_QUEUE_SIZE", 32),
            max_sessions=_whole(env, "SPECVIZ_MAX_SESSIONS", 256),
            mcp=_flag(env, "SPECVIZ_MCP", True),
            public=public,
            pairs=_presets(env, "SPECVIZ_PAIRS"),
            max_runs_per_visitor=_whole(env, "SPECVIZ_MAX_RUNS_PER_VISITOR", 2),
            space=bool(env.get("SPACE_ID")),
            max_request_bytes=_whole(env, "SPECVIZ_MAX_REQUEST_BYTES", 16_000_000),
            max_light_per_visitor=_whole(env, "SPECVIZ_MAX_LIGHT_PER_VISITOR", cls.max_light_per_visitor),
            max_events_per_visitor=_whole(env, "SPECVIZ_MAX_EVENTS_PER_VISITOR", cls.max_events_per_visitor),
            trusted_hops=_whole(env, "SPECVIZ_TRUSTED_HOPS", 1 if env.get("SPACE_ID") else 0, least=0),
            max_upload_bytes=_whole(env, "SPECVIZ_MAX_UPLOAD_BYTES", cls.max_upload_bytes),
            max_upload_files=_whole(env, "SPECVIZ_MAX_UPLOAD_FILES", cls.max_upload_files),
            max_upload_field_bytes=_whole(env, "SPECVIZ_MAX_UPLOAD_FIELD_BYTES", cls.max_upload_field_bytes),
            max_uploads_per_minute=_whole(env, "SPECVIZ_MAX_UPLOADS_PER_MINUTE", cls.max_uploads_per_minute),
            max_refused_per_minute=_whole(env, "SPECVIZ_MAX_REFUSED_PER_MINUTE", cls.max_refused_per_minute, least=0),
            memory_trim=_flag(env, "SPECVIZ_MEMORY_TRIM", True),
        )


def default_pair_here() -> str:
    """The bundled pair on a CPU. On a GPU a pass over the 1.5B target costs about what a drafted
    token of the 0.5B draft does (both bound by kernel launches, not bytes), so drafting cannot
    pay there; a 7B target's pass costs several drafted tokens."""
    from specviz.app import zero_gpu

    if zero_gpu.ON_ZERO_GPU:
        return GPU_DEFAULT_PAIR
    import torch

    return GPU_DEFAULT_PAIR if torch.cuda.is_available() else DEFAULT_PAIR


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if value is not None and value.strip() else None


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    text = _text(env, name)
    if text is None:
        return default
    value = yes_no(text)
    if value is None:
        raise UserError(f"{name} is {text!r}; it must be one of {', '.join(YES + NO)}")
    return value


def _whole(env: Mapping[str, str], name: str, default: int, least: int = 1) -> int:
    text = _text(env, name)
    if text is None:
        return default
    if not text.isdigit() or int(text) < least:
        raise UserError(f"{name} is {text!r}; it must be a whole number, {least} or more (default {default})")
    return int(text)


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    text = _text(env, name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UserError(f"{name} is {text!r}; it must be a number of seconds above 0 (default {default:g})")
    return value


def _presets(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    text = _text(env, name)
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise UserError(f"{name} names {unknown[0]!r}; it must list presets, comma-separated ({', '.join(PRESETS)})")
    return names
