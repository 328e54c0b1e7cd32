"""A panel written the way docs/ARCHITECTURE.md says a new one is: a layout class whose
`__init__` makes the panel's components where it lays them out, and a `Panel` subclass that
builds it, wires its button and redraws from the current trace. It says how many drafted
tokens the run's rounds held; its button says how many of them were accepted."""

from __future__ import annotations

import gradio as gr

from specviz.app.tab import PRIVATE, Panel, Shared
from specviz.events import RoundEvent, Trace


def rounds(trace: Trace | None) -> list[RoundEvent]:
    return [e for e in trace.events if isinstance(e, RoundEvent)] if trace is not None else []


def drafted_words(trace: Trace | None) -> str:
    return f"{sum(len(r.drafted) for r in rounds(trace))} drafted tokens"


def accepted_words(trace: Trace | None) -> str:
    return f"{sum(r.accepted for r in rounds(trace))} accepted"


class ToyDrafted:
    """The panel's components, each made where it is laid out (inside the tab's gr.Tab)."""

    def __init__(self):
        self.words = gr.Markdown("No run yet.", elem_id="toy-panel-words")
        self.count = gr.Button("Count the accepted drafts", elem_id="toy-panel-count")
        self.accepted = gr.Markdown("", elem_id="toy-panel-accepted")


class ToyPanel(Panel):
    def build(self, shared: Shared) -> None:
        self.ui = ToyDrafted()
        self.redraw_outputs = [self.ui.words]

    def wire(self, shared: Shared) -> None:
        self.ui.count.click(accepted_words, [shared.trace], [self.ui.accepted], **PRIVATE)

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return (drafted_words(trace),)
