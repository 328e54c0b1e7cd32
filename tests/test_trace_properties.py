"""Property-based tests of the trace loader (`specviz.events.load_trace`): whatever comes in,
out comes either a Trace or a TraceError that says what is wrong, never another exception.

A trace that loads must also be safe to draw: every viz function runs on it without an
error, and text from the file (token texts, the prompt) reaches the HTML escaped. The
inputs are arbitrary bytes, arbitrary JSON, and real traces from the tiny models with one
part replaced by an arbitrary JSON value (the likeliest shape of a broken or hostile file).
"""

from __future__ import annotations

import functools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

from specviz import viz
from specviz.engine import run
from specviz.errors import UserError
from specviz.events import MAX_TRACE_BYTES, RoundEvent, Trace, TraceError, load_trace
from specviz.settings import GenerationSettings
from specviz.viz import acceptance_plots

pytestmark = pytest.mark.usefixtures("single_thread")

FAST = settings(max_examples=300, deadline=None)
DRAWN = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Building the Plotly figures of one trace takes about a second here.
FIGURES = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HOSTILE = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "&amp;lt;",
    "\u202eevil\u202c",
    "\U0001f680\U0001f600",
    "a\u200bb",
    "\x00\x07\x1b[31m\r\n",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(HOSTILE),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@functools.cache
def sample_traces() -> tuple[dict, ...]:
    """Real traces as JSON objects: speculative greedy, speculative sampled, plain."""
    pair = tiny_pair("close")
    runs = [
        GenerationSettings(max_new_tokens=12, k=3, policy="fixed"),
        GenerationSettings(max_new_tokens=12, k=4, policy="fixed", temperature=1.0, top_p=0.9, seed=3),
        GenerationSettings(max_new_tokens=6, mode="plain"),
    ]
    return tuple(run(pair, "def reverse(s):", s).to_dict() for s in runs)


def load_or_refuse(data) -> Trace | None:
    """The loaded trace, or None after a TraceError; any other exception fails the test."""
    try:
        trace = load_trace(data)
    except TraceError as e:
        assert str(e) and "\n" not in str(e) and len(str(e)) < 500, "a refusal is one short line"
        return None
    assert isinstance(trace, Trace)
    return trace


def draw_html(trace: Trace) -> list[str]:
    """Every HTML view of a trace the page draws."""
    events = trace.events
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    html = [viz.tokens_html(events), viz.stats_html(viz.live_stats(events))]
    for r in rounds:
        html.append(viz.round_narrative_html(r))
        viz.position_choices(r)  # labels of a radio: text, not HTML
    pred = viz.predict(trace.summary, events, k=trace.settings.get("k"), plain=trace.summary)
    if pred is not None:
        html += [viz.prediction_html(pred), *viz.gap_explanation(pred)]
    html += [viz.comparison_html(trace.summary, trace.summary), viz.identity_html(trace, trace)]
    html += list(viz.race_frame(trace, trace, viz.race_end_s(trace) / 2))
    return html


def draw_figures(trace: Trace, every_position: bool = False) -> list:
    """Every figure of a trace (p vs q bars at the first round's positions only, unless asked)."""
    events = trace.events
    figures = [
        viz.round_timeline_figure(events),
        acceptance_plots.position_rates_figure(events),
        acceptance_plots.lengths_figure(events),
        viz.tokens_vs_time_figure(trace, trace),
    ]
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    for r in rounds if every_position else rounds[:1]:
        figures += [viz.position_bars_figure(r, pos) for _, pos in viz.position_choices(r)]
    return figures


def assert_drawn(figures: list) -> None:
    """Each figure draws something or says why not, and is a figure the browser can take."""
    for fig in figures:
        drawn = json.loads(fig.to_json())
        assert drawn["data"] or drawn["layout"].get("annotations"), "neither data nor a message"


def assert_escaped(html: list[str]) -> None:
    for piece in html:
        low = piece.lower()
        assert "<script" not in low and "<img" not in low, piece[:300]


def paths(node, prefix=()) -> list[tuple]:
    """Every place in a JSON value: key / index paths, the root included."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, prefix + (i,))
    return out


def replaced(node, path, value, delete: bool):
    """A deep copy of `node` with the value at `path` replaced (or its key / item removed)."""
    node = json.loads(json.dumps(node))
    if not path:
        return value
    parent = functools.reduce(lambda n, k: n[k], path[:-1], node)
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return node


@FAST
@given(st.binary(max_size=2000))
def test_any_bytes_give_a_trace_or_a_clear_error(data):
    load_or_refuse(data)


@FAST
@given(st.text(max_size=500))
def test_any_text_gives_a_trace_or_a_clear_error(text):
    load_or_refuse(text)
    load_or_refuse(text.encode("utf-8", "surrogatepass"))


@FAST
@given(json_values)
def test_any_json_gives_a_trace_or_a_clear_error(value):
    load_or_refuse(json.dumps(value))


@DRAWN
@given(st.integers(0, 2), st.data(), json_values, st.booleans())
def test_a_real_trace_with_any_part_replaced_loads_safely_or_is_refused(which, data, value, delete):
    original = sample_traces()[which]
    path = data.draw(st.sampled_from(paths(original)))
    broken = replaced(original, path, value, delete and bool(path))
    trace = load_or_refuse(json.dumps(broken))
    if trace is not None:
        assert load_trace(trace.to_json()) == trace  # what loads, saves and loads again unchanged
        assert_escaped(draw_html(trace))


@FIGURES
@given(st.integers(0, 2), st.data(), json_values)
def test_a_real_trace_with_any_part_replaced_draws_its_figures_or_is_refused(which, data, value):
    original = sample_traces()[which]
    broken = replaced(original, data.draw(st.sampled_from(paths(original))), value, False)
    trace = load_or_refuse(json.dumps(broken))
    if trace is not None:  # what loads, round-trips and draws
        assert load_trace(json.dumps(trace.to_dict()).encode()).to_dict() == trace.to_dict()
        assert_drawn(draw_figures(trace))


@DRAWN
@given(st.integers(0, 2), st.data(), st.sampled_from(HOSTILE))
def test_hostile_text_anywhere_loads_and_is_drawn_escaped(which, data, text):
    """Any string in a trace may hold markup, bidi overrides or control characters: the trace
    loads (text is text) and every drawing shows it escaped."""
    original = sample_traces()[which]
    strings = [p for p in paths(original) if isinstance(functools.reduce(lambda n, k: n[k], p, original), str)]
    path = data.draw(st.sampled_from(strings))
    trace = load_or_refuse(json.dumps(replaced(original, path, text, False)))
    if path[0] == "settings" or path[-1] in ("type", "decision", "kind", "mode", "policy_note"):
        return  # enumerations: refusing an unknown value is right
    assert trace is not None
    assert_escaped(draw_html(trace))


def test_real_traces_round_trip_and_draw():
    for d in sample_traces():
        trace = load_trace(json.dumps(d).encode())
        assert trace.to_dict() == d
        assert_drawn(draw_figures(trace, every_position=True))


def test_every_token_text_hostile_is_drawn_as_text():
    d = json.loads(json.dumps(sample_traces()[1]))
    i = 0
    for event in d["events"]:
        for part in event["drafted"] + ([event["emitted"]] if event["emitted"] else []):
            part["text"] = HOSTILE[i % len(HOSTILE)]
            i += 1
    d["prompt"] = d["text"] = HOSTILE[0]
    trace = load_trace(json.dumps(d))
    stream = viz.tokens_html(trace.events)
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in stream
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in stream
    assert "&amp;amp;lt;" in stream  # an entity is shown as typed, not decoded
    assert "\\u202e" in stream and "\\u200b" in stream and "\\x07" in stream  # invisibles made visible
    assert "\U0001f680" in stream  # emoji stay themselves
    assert_escaped(draw_html(trace))


@pytest.mark.parametrize(
    "data, words",
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"{not json", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"prompt": "\\ud800"}', "lone surrogate"),
        (b"[]", "expected an object"),
        (b"{}", "missing events, prompt, settings, summary, text, token_ids"),
        ("1" * 5000, "not JSON"),  # an integer too long to convert
    ],
)
def test_malformed_files_are_refused_in_words(data, words):
    with pytest.raises(TraceError, match=words):
        load_trace(data)


def mutated(which: int, path: tuple, value) -> dict:
    return replaced(sample_traces()[which], path, value, False)


@pytest.mark.parametrize(
    "path, value, words",
    [
        (
            ("events", 0, "index"),
            '0" onmouseover="window.__pwned=1',
            r"events\[0\]\.index: expected a whole number, got a string",
        ),
        (("events", 1, "drafted", 0, "p"), float("nan"), r"drafted\[0\]\.p is nan; expected a finite number"),
        (
            ("events", 1, "drafted", 0, "decision"),
            "maybe",
            "decision: expected 'accepted', 'rejected' or 'unchecked', got a string",
        ),
        (("events", 0, "type"), "<b>x</b>", r"trace\.events\[0\]\.type: expected 'round' or 'plain', got a string"),
        (("summary", "new_tokens"), True, "summary.new_tokens: expected a whole number, got true or false"),
        (("token_ids",), [1, "2"], r"token_ids\[1\]: expected a whole number, got a string"),
        (("settings", "k"), 10**9, "trace.settings: k must be a whole number from 1 to 16"),
        (("settings", "temperature"), "hot", "settings.temperature: expected a finite number, got a string"),
        (("settings", "<script>"), 1, "trace.settings: 1 unknown names"),
        (("version",), 2, "trace.version: expected 1, got 2"),
    ],
)
def test_wrong_types_and_values_are_refused_naming_the_field(path, value, words):
    with pytest.raises(TraceError, match=words) as err:
        load_trace(json.dumps(mutated(0, path, value)))
    assert "<" not in str(err.value), "a refusal never repeats the file's text"


def test_the_size_cap_refuses_before_parsing():
    big = json.dumps(sample_traces()[0]).encode()
    assert load_trace(big, max_bytes=len(big)) is not None
    with pytest.raises(TraceError, match=f"the trace is {len(big)} bytes; the limit is {len(big) - 1} bytes"):
        load_trace(big, max_bytes=len(big) - 1)
    with pytest.raises(TraceError, match="the trace is 33.0 MB; the limit is 32.0 MB"):
        load_trace(b" " * (MAX_TRACE_BYTES + (1 << 20)))


def test_trace_errors_are_user_errors_and_from_json_uses_the_same_checks():
    assert issubclass(TraceError, UserError)
    with pytest.raises(TraceError):
        Trace.from_json(b"\xff")
    assert math.isfinite(Trace.from_json(json.dumps(sample_traces()[2])).summary.wall_s)
