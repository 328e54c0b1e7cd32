"""Tab 2, the round inspector: step through a run one round at a time.

For the chosen round: the text so far (the round itself last), the round told in plain
words, and for the chosen position the target's p against the draft's q over the top tokens,
with their overlap and the residual. A tree round also shows its tree and its tree attention
mask; a round drafted with another tokenizer shows the draft's own tokens above the target
tokens they became; a suffix or lookahead round shows where its candidates came from. Clicking a token in any stream picks its round and position.
"""

from __future__ import annotations

import gradio as gr

from specviz.choices import PLAIN
from specviz import viz
from specviz.app.streams import TOKEN_CLICK_JS, alignment_view
from specviz.app.shown_errors import shown_errors
from specviz.events import RoundEvent, Trace
from specviz.viz.inspector import position_bars_figure, position_choices, round_at, round_narrative_html, trace_rounds
from specviz.viz.palette import empty_figure
from specviz.viz.source import source_html
from specviz.viz.tree import tree_figure, tree_mask_figure
from specviz.app.tab import PRIVATE, Shared, Tab, chart, hint, muted, shown

NO_ROUNDS = "Run a generation (or upload a trace) in speculative mode: its rounds appear here."


class InspectorTab:
    """The tab's components, each made where it is laid out (inside the caller's gr.Tab)."""

    def __init__(self):
        hint(
            "Step through the run one round at a time. Click any token, here or in the live run, "
            "to see the round and the position it came from."
        )
        with gr.Row(equal_height=False, elem_id="round-stepper"):
            self.prev = gr.Button("\u25c0 Previous", size="sm", min_width=90, scale=0, elem_id="round-prev")
            self.round = gr.Slider(
                0, 1, value=0, step=1, precision=0, label="Round", elem_id="round", scale=1, min_width=160
            )
            self.next = gr.Button("Next \u25b6", size="sm", min_width=90, scale=0, elem_id="round-next")
        self.tokens = gr.HTML(
            viz.tokens_html([], empty=NO_ROUNDS), elem_id="inspector-tokens", js_on_load=TOKEN_CLICK_JS
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                self.story = gr.HTML(elem_id="round-story")
                self.position = gr.Radio([], label="Position in the round", elem_id="position")
            with gr.Column(scale=1, min_width=300):
                self.bars = chart(
                    "position-bars", empty_figure("p and q at the chosen position appear here", None, 320)
                )
        self.alignment = gr.HTML(visible=False, elem_id="round-alignment")  # a round drafted with another tokenizer
        self.source = gr.HTML(visible=False, elem_id="round-source")  # a suffix or lookahead round
        with gr.Row(equal_height=False, visible=False, elem_id="round-tree-box") as self.tree_box:  # a tree round
            self.tree = chart("round-tree", min_width=300)
            self.mask = chart("round-tree-mask", min_width=300)

    @property
    def outputs(self) -> list:
        """inspect()'s outputs, in its return order."""
        return [
            self.round,
            self.story,
            self.position,
            self.bars,
            self.tokens,
            self.tree_box,
            self.tree,
            self.mask,
            self.alignment,
            self.source,
        ]


def first_drafted(trace: Trace | None) -> int:
    """The round the inspector opens at: the first that drafted anything (a run's first token
    comes from the prompt's prefill, in a round that drafted nothing)."""
    return next((i for i, e in enumerate(trace_rounds(trace)) if e.drafted), 0)


def default_position(event: RoundEvent) -> int:
    """The most telling position of a round: its rejection if any, else its last."""
    choices = [pos for _, pos in position_choices(event)]
    rejected = [i for i, d in enumerate(event.drafted, start=1) if d.decision == "rejected" and i in choices]
    return rejected[0] if rejected else (choices[-1] if choices else 1)


@shown_errors
def inspect(trace: Trace | None, round_index, position=None) -> tuple:
    """Everything the inspector shows for one round (clamped to the run) and one position."""
    rounds = trace_rounds(trace)
    if not rounds:
        message = NO_ROUNDS if trace is None or trace.mode != PLAIN else "Plain decoding has no rounds to inspect."
        return (
            gr.Slider(minimum=0, maximum=1, value=0, interactive=False),
            muted(message),
            gr.Radio(choices=[], value=None),
            empty_figure(message, None, 320),
            viz.tokens_html([], empty=message),
            *round_extras(None, trace),
        )
    i = round_at(rounds, round_index)
    event = rounds[i]
    choices = position_choices(event)
    valid = {pos for _, pos in choices}
    pos = int(position) if position is not None and int(position) in valid else default_position(event)
    return (
        gr.Slider(minimum=0, maximum=max(len(rounds) - 1, 1), value=i, interactive=len(rounds) > 1),
        round_narrative_html(event, (trace.meta.get("grammar") or {}).get("vocab_size")),
        gr.Radio(choices=choices, value=pos if pos in valid else None),
        position_bars_figure(event, pos),
        viz.tokens_html(rounds[: i + 1]),
        *round_extras(event, trace),
    )


def round_extras(event: RoundEvent | None, trace: Trace | None) -> tuple:
    """The tree box (shown or hidden), the tree, its mask, the alignment and the candidates'
    source, for one round: figures are drawn only for a tree round, the alignment only for a
    cross-tokenizer one, the source only for a suffix or lookahead one."""
    if event is not None and event.tree:
        box, tree, mask = gr.Row(visible=True), tree_figure(event), tree_mask_figure(event)
    else:
        box, tree, mask = gr.Row(visible=False), gr.skip(), gr.skip()
    align = alignment_view(event, trace.meta if trace is not None else None)
    source = shown(gr.HTML, source_html(event) if event is not None and event.source else None)
    return box, tree, mask, align, source


@shown_errors
def bars(trace: Trace | None, round_index, position) -> object:
    rounds = trace_rounds(trace)
    if not rounds or position is None:
        return gr.skip()
    return position_bars_figure(rounds[round_at(rounds, round_index)], int(position))


def step(trace: Trace | None, round_index, delta: int) -> tuple:
    return inspect(trace, int(round_index or 0) + delta)


def clicked(trace: Trace | None, evt: gr.EventData) -> tuple:
    """A token was clicked: its data-round and data-pos pick the round and position."""
    data = getattr(evt, "_data", None) or {}
    return inspect(trace, data.get("round", 0), data.get("pos"))


class InspectorPage(Tab):
    """Step through the rounds; a click on a token in either stream opens its round."""

    id, title = "inspector", "Round inspector"

    def build(self, shared: Shared) -> None:
        self.ui = InspectorTab()
        self.redraw_outputs = self.ui.outputs

    def wire(self, shared: Shared) -> None:
        ui, trace = self.ui, shared.trace
        ui.round.release(inspect, [trace, ui.round], ui.outputs, **PRIVATE)
        ui.prev.click(lambda t, r: step(t, r, -1), [trace, ui.round], ui.outputs, **PRIVATE)
        ui.next.click(lambda t, r: step(t, r, +1), [trace, ui.round], ui.outputs, **PRIVATE)
        ui.position.input(bars, [trace, ui.round, ui.position], [ui.bars], **PRIVATE)
        ui.tokens.click(clicked, [trace], ui.outputs, **PRIVATE)
        live_tokens = shared.built["live"].ui.tokens
        live_tokens.click(clicked, [trace], ui.outputs, **PRIVATE).then(
            lambda: gr.Tabs(selected=self.id), None, [shared.tabs], **PRIVATE
        )

    def redraw(self, trace: Trace | None, *values) -> tuple:
        return inspect(trace, first_drafted(trace))
