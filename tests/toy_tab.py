"""A tab written the way docs/ARCHITECTURE.md says a new one is: a `Tab` subclass with an id
and a title, its components built in `build`, and a `redraw` from the current trace. It says
how many tokens the run gained and in how many rounds."""

from __future__ import annotations

import gradio as gr

from specviz.app.tab import Shared, Tab
from specviz.events import RoundEvent, Trace


class ToyTab(Tab):
    id = "toy-rounds"
    title = "Toy: rounds"

    def build(self, shared: Shared) -> None:
        self.words = gr.Markdown("No run yet.", elem_id="toy-rounds-words")

    @property
    def redraw_outputs(self) -> list:
        return [self.words]

    def redraw(self, trace: Trace | None, *values) -> tuple:
        if trace is None:
            return ("No run yet.",)
        rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
        return (f"{sum(r.gained for r in rounds)} tokens in {len(rounds)} rounds",)
