"""The viz package as a whole: no torch or gradio, replayed traces draw like live runs, and
the stylesheet styles every class the HTML uses."""

import re
import subprocess
import sys
from pathlib import Path

from viz_sample import plain_trace, spec_trace

from specviz.events import Trace
from specviz.viz import legend_html, live_stats, race_frame, round_narrative_html, stats_html, tokens_html

CSS = (Path(__file__).resolve().parents[1] / "assets" / "specviz.css").read_text()


def test_importing_viz_loads_neither_torch_nor_gradio():
    code = "import sys, specviz.viz; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'gradio')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_a_saved_trace_draws_exactly_like_the_live_one():
    live = spec_trace()
    replayed = Trace.from_json(live.to_json())
    assert tokens_html(replayed.events) == tokens_html(live.events)
    assert round_narrative_html(replayed.events[0]) == round_narrative_html(live.events[0])
    assert race_frame(replayed, Trace.from_json(plain_trace().to_json()), 1.2) == race_frame(live, plain_trace(), 1.2)


def test_stylesheet_covers_every_class_the_html_uses_in_both_themes():
    html = tokens_html(spec_trace().events) + legend_html(plain=True) + stats_html(live_stats(spec_trace().events))
    used = {c for attr in re.findall(r'class="([^"]+)"', html) for c in attr.split()}
    defined = set(re.findall(r"\.([a-z][a-z0-9-]*)", CSS))
    assert used <= defined, used - defined
    dark = CSS[CSS.index(".dark {") :]
    for var in re.findall(r"(--sv-[a-z-]+):", CSS[: CSS.index(".dark {")]):
        assert var in dark  # every colour has a dark-theme value
    assert "white-space: pre-wrap" in CSS and "unicode-bidi: isolate" in CSS and "line-through" in CSS
