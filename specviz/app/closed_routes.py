"""Gradio routes a public page has no use for, closed before they read anything.

Each serves a feature the page does not show, and each lets a visitor make the server work or
write for them:
- `deep_link` writes a session's every component value to a new file on disk, per call (a
  page with no deep-link button never asks for one);
- `process_recording` copies a posted video to disk and runs ffmpeg on it (the screen
  recorder of Gradio's settings panel);
- `component_server` calls a component's server functions (the page declares none).
A local page keeps them: they are its owner's to use.
"""

from __future__ import annotations

PREFIX = "/gradio_api/"  # gradio.route_utils.API_PREFIX
CLOSED = ("deep_link", "process_recording", "component_server")


def closed(path: str) -> str | None:
    """The one line a public page answers `path` with, or None where it is open."""
    name = path.removeprefix(PREFIX).rstrip("/") if path.startswith(PREFIX) else None
    if name in CLOSED:
        return f"{PREFIX}{name} is not served on a public page"
    return None
