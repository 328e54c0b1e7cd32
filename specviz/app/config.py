"""What the page is launched with, read from the environment once at start-up.

    GRADIO_SERVER_NAME / GRADIO_SERVER_PORT or PORT   where to listen (127.0.0.1:7860)
    SPECVIZ_DEFAULT_PAIR       the pair selected and preloaded (the bundled qwen-coder)
    SPECVIZ_PRELOAD=0          do not start loading the default pair at launch
    SPECVIZ_ALLOW_CUSTOM_MODELS=0   offer only the presets (models refuses the rest too); the
                               default is 0 on a Hugging Face Space, else 1. A page bound beyond
                               127.0.0.1 never loads a visitor's local paths, only Hub ids.
    SPECVIZ_MAX_WALL_S         stop any one run after this many seconds (300)
    SPECVIZ_QUEUE_SIZE         requests that may wait in the queue (32)
    SPECVIZ_MAX_SESSIONS       sessions whose page state is kept (256): Gradio keeps a copy of the
                               page's settings per session (every browser tab, API client and raw
                               API call) until this many newer ones push it out
    SPECVIZ_MCP=0              do not serve the page's tools as an MCP server (app/tools.py) at
                               /gradio_api/mcp/
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from specviz.errors import UserError
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.models.catalogue.sources import custom_allowed


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

    @property
    def local_only(self) -> bool:
        """Whether only this machine can reach the page."""
        return self.host in ("127.0.0.1", "localhost", "::1")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "PageConfig":
        env = os.environ if env is None else env
        return cls(
            host=env.get("GRADIO_SERVER_NAME") or "127.0.0.1",
            port=_int(env.get("GRADIO_SERVER_PORT") or env.get("PORT") or "7860", "the port"),
            default_pair=env.get("SPECVIZ_DEFAULT_PAIR") or DEFAULT_PAIR,
            preload=env.get("SPECVIZ_PRELOAD", "1") != "0",
            allow_custom=custom_allowed(env),
            max_wall_s=float(_int(env.get("SPECVIZ_MAX_WALL_S") or "300", "SPECVIZ_MAX_WALL_S")),
            queue_size=_int(env.get("SPECVIZ_QUEUE_SIZE") or "32", "SPECVIZ_QUEUE_SIZE"),
            max_sessions=_int(env.get("SPECVIZ_MAX_SESSIONS") or "256", "SPECVIZ_MAX_SESSIONS"),
            mcp=env.get("SPECVIZ_MCP", "1") != "0",
        )


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{what} must be a whole number (got {text!r})") from None
