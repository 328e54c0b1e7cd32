"""A tab written the way docs/ARCHITECTURE.md says a new one is: a class whose `__init__` makes
the tab's components where it lays them out, and a `Tab` subclass with an id and a title that
builds it, lists what its `redraw` writes and redraws from the current trace. It says how many
tokens the run gained and in how many rounds."""

from __future__ import annotations

import gradio as gr

from specviz.app.tab import Shared, Tab
from specviz.events import RoundEvent, Trace


class ToyRounds:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab)."""

    def __init__(self):
        self.words = gr.Markdown("No run yet.", elem_id="toy-rounds-words")


class ToyTab(Tab):
    id = "toy-rounds"
    title = "Toy: rounds"

    def build(self, shared: Shared) -> None:
        self.ui = ToyRounds()
        self.redraw_outputs = [self.ui.words]

    def redraw(self, trace: Trace | None, *values) -> tuple:
        if trace is None:
            return ("No run yet.",)
        rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
        return (f"{sum(r.gained for r in rounds)} tokens in {len(rounds)} rounds",)
