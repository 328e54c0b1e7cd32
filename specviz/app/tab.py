"""What a tab of the page is: `page.py` builds every tab of `page.TABS` in order, inside its
own `gr.Tab`, then wires each one's events, and redraws every tab from the session's current
trace whenever a run, a stop or an upload changes it.

A new tab is a module in `specviz/app/` with a `Tab` subclass and one entry in `page.TABS`
(docs/ARCHITECTURE.md); its drawing goes in `specviz/viz/`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from specviz.app.config import PageConfig
from specviz.events import Trace

# Everything that runs a model shares one slot: one at a time.
MODELS = {"concurrency_id": "models", "concurrency_limit": 1}
# Every other queued handler (drawing, the theory and lossless labs, the race replay) shares
# these few slots, whatever its event (page.one_queue).
LIGHT = {"concurrency_id": "light", "concurrency_limit": 4}


@dataclass
class Shared:
    """What the page hands every tab."""

    config: PageConfig
    trace: gr.State  # the session's current trace: the last run, or an uploaded one
    plain: gr.State  # plain decoding of the same prompt and settings, for side by side
    tabs: gr.Tabs
    demo: gr.Blocks
    built: dict[str, "Tab"] = field(default_factory=dict)  # the tabs by id, to wire to another's components
    # Redraw every tab from the current trace after `event` (set by the page before wiring).
    then_refresh: Callable[[Any], Any] = lambda event: event


class Tab:
    """One tab. `build` lays out its components (kept on self); `wire` connects their events;
    a tab that shows the current trace lists what its `redraw` reads besides the trace
    (`redraw_inputs`) and writes (`redraw_outputs`)."""

    id: str
    title: str

    def build(self, shared: Shared) -> None:
        raise NotImplementedError

    def wire(self, shared: Shared) -> None:
        pass

    @property
    def redraw_inputs(self) -> list:
        return []

    @property
    def redraw_outputs(self) -> list:
        return []

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return ()
