"""What a tab of the page is: `page.py` builds every tab of `parts.TABS` in order, inside its
own `gr.Tab`, then the panels `parts.PANELS` adds to it, then wires each one's events, and
redraws every tab and panel from the session's current trace whenever a run, a stop or an
upload changes it.

A new tab is a module with a `Tab` subclass and one line in `parts.TABS`; a new panel of a tab,
a module with a `Panel` subclass and one line in `parts.PANELS` (docs/ARCHITECTURE.md). Their
drawing goes in `specviz/viz/`. What the tabs share is here, written once: the queue's slots, a
handler kept out of the API, Stop, a hint, a placeholder, a chart and a component shown or
hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from specviz.app import runner
from specviz.app.config import PageConfig
from specviz.app.stopping import session_of
from specviz.choices import SPECULATIVE
from specviz.events import RoundEvent, Trace
from specviz.viz.text import paragraphs_html

# Everything that runs a model shares one slot: one at a time.
MODELS = {"concurrency_id": "models", "concurrency_limit": 1}
# Every other queued handler (drawing, the theory and lossless labs, the race replay) shares
# these few slots, whatever its event (page.one_queue).
LIGHT = {"concurrency_id": "light", "concurrency_limit": 4}
# A handler of the page's own, not an API endpoint (the API is page.py's and tools.py's).
PRIVATE = {"api_visibility": "private"}


def stop(request: gr.Request) -> None:
    """Stop: the run of the request's browser session ends before its next round."""
    runner.FLAGS.stop(session_of(request))


def stops(trigger: Callable, cancels: list | None = None) -> Any:
    """`trigger` (a listener, such as `button.click`) stops the session's run at once, outside
    the queue, and cancels the `cancels` events."""
    return trigger(stop, None, None, queue=False, cancels=cancels, **PRIVATE)


def hint(markdown: str) -> gr.Markdown:
    """A section's words of explanation, in the page's muted style."""
    return gr.Markdown(markdown, elem_classes=["sv-hint"])


def speculative(trace: Trace | None) -> bool:
    """Whether `trace` (a run, or an uploaded trace) is speculative decoding with rounds to read."""
    return trace is not None and trace.mode == SPECULATIVE and any(isinstance(e, RoundEvent) for e in trace.events)


def chart(elem_id: str, value: Any = None, **layout) -> gr.Plot:
    """A figure of the page's: each figure carries its own title, so the component shows no label."""
    return gr.Plot(value, elem_id=elem_id, show_label=False, **layout)


def shown(kind: type, value: Any = None) -> Any:
    """An update of a `kind` component: shown with `value`, or hidden when there is none."""
    return kind(visible=False) if value is None else kind(value, visible=True)


def muted(text: str) -> str:
    """A placeholder paragraph (what to do first, what a section will show), as HTML."""
    return paragraphs_html([text], "sv-muted")


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


class Panel:
    """A part of the page that shows the current trace or wires events: a tab, or a panel
    another module adds to a tab. `build` lays out its components: it makes its layout class
    (whose `__init__` makes each component where it lays it out, as an attribute) and keeps it
    as `self.ui`; `wire` connects their events; one that shows the current trace lists, once
    built, what its `redraw` reads besides the trace (`redraw_inputs`) and writes
    (`redraw_outputs`)."""

    redraw_inputs: Sequence = ()
    redraw_outputs: Sequence = ()

    def build(self, shared: Shared) -> None:
        raise NotImplementedError

    def wire(self, shared: Shared) -> None:
        pass

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return ()


class Tab(Panel):
    """One tab of the page, with the panels other modules add to it (`parts.PANELS`, built
    after its own components, inside it)."""

    id: str
    title: str
    panels: Sequence[Panel] = ()
