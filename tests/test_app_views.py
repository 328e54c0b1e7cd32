"""The page's handlers as plain functions, on a trace from the engine (tiny models, in-process)."""

from __future__ import annotations

from html.parser import HTMLParser

import html
import json
import math

import gradio as gr
import pytest

from specviz.app import compare, inspector, live, theory_tab, traces
from specviz.workshop import lossless_tab
from specviz.app.config import PageConfig
from specviz.app.loading import LoadState
from specviz.app.page import build_page, status_html
from specviz.app.shown_errors import shown_errors
from specviz.engine import run
from specviz.errors import UserError
from specviz.events import RoundEvent, Trace
from specviz.settings import GenerationSettings
from tiny_models import tiny_pair

HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture(scope="module")
def trace() -> Trace:
    # A fixed k: the cost-aware policy's choice rests on pass costs timed on this machine's
    # clock, and on a busy machine it may rightly draft nothing; these views need drafts.
    return run(tiny_pair("close"), "for i in range(10):", GenerationSettings(k=4, policy="fixed", max_new_tokens=48))


def test_the_page_builds_with_the_stable_element_ids():
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    ids = {getattr(block, "elem_id", None) for block in demo.blocks.values()}
    assert {"prompt", "run", "stop", "k", "pair", "tokens", "timeline", "stats"} <= ids
    api = demo.get_api_info()["named_endpoints"]
    # generate and the tools (parts.TOOLS, also the MCP server's), nothing the page wires privately
    assert list(api) == [
        "/generate",
        "/speedup",
        "/best_k",
        "/lossless_check",
        "/export_settings",
        "/read_metrics",
        "/generate_summary",
    ]
    params = [p["parameter_name"] for p in api["/generate"]["parameters"]]
    assert params[:9] == ["prompt", "pair", "drafter", "k", "temperature", "top_p", "max_new_tokens", "seed", "mode"]


def test_after_a_run_widgets_are_read_only_once_the_trace_only_figures_are_drawn():
    # The export format changed while the run's figures were drawn must not be overwritten by
    # the format as it was when the run ended: the step that reads it comes after them.
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    by_id = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    fns = list(demo.fns.values())
    run = next(f for f in fns if f.name == "run" and f.trigger_after is not None)
    chain, fn = [], run
    while (fn := next((f for f in fns if f.trigger_after == fn._id), None)) is not None:
        chain.append(fn)
    reads = [{by_id[b._id] for b in f.inputs} for f in chain]
    writes = [{by_id[b._id] for b in f.outputs} for f in chain]
    export = next(i for i, w in enumerate(writes) if "export-code" in w)
    assert "export-format" in reads[export]
    figures = next(i for i, w in enumerate(writes) if "race-curve" in w)
    assert figures < export and "export-format" not in reads[figures]


class _Elements(HTMLParser):
    """Each element's tag, attributes and text (its own and its children's), in document order."""

    def __init__(self, html: str):
        super().__init__()
        self.found: list[dict] = []
        self._open: list[dict] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, **dict(attrs), "text": ""}
        self.found.append(element)
        self._open.append(element)

    def handle_endtag(self, tag):
        while self._open and self._open.pop()["tag"] != tag:
            pass

    def handle_data(self, data):
        for element in self._open:
            element["text"] += data

    def by_class(self, name: str) -> list[dict]:
        return [e for e in self.found if name in (e.get("class") or "").split()]


def test_live_views_show_the_stream_stats_and_why_the_run_stopped(trace):
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
    stream, stats, timeline, tree, alignment = live.live_views(trace)
    page = _Elements(stream)
    # The stream: one token element per drafted or emitted token, then why the run ended.
    assert len(page.by_class("tok")) == sum(len(e.drafted) + (e.emitted is not None) for e in rounds)
    (state,) = page.by_class("sv-run-state")
    assert state["data-state"] == "done" and page.found[-1] is state
    assert f"{len(rounds)} rounds" in state["text"] and "max new tokens" in state["text"]
    # The stats, label -> value: the run stopped at max_new_tokens = 48, in as many rounds as the trace holds.
    cards = _Elements(stats)
    labels = [lab["text"] for lab in cards.by_class("sv-stat-label")]
    values = dict(zip(labels, (v["text"] for v in cards.by_class("sv-stat-value"))))
    titles = dict(zip(labels, (c.get("title") for c in cards.by_class("sv-stat"))))
    assert values["tokens"] == "48"
    assert float(values["tokens / round"]) == pytest.approx(48 / len(rounds), abs=0.005)
    assert titles["tokens / round"] == f"48 tokens in {len(rounds)} rounds"
    # The timeline: a draft bar and a verify bar per round.
    bars = {t.name: len(t.x) for t in timeline.data if t.type == "bar"}
    assert bars["draft"] == bars["verify"] == len(rounds)
    # Between redraws the timeline is left as drawn (gr.skip(), an empty update), the rest redrawn alike.
    again = live.live_views(trace, plot=False)
    assert again[:2] == (stream, stats) and again[2:] == ({"__type__": "update"},) * 3
    # A chain run drawn from one tokenizer has no tree and no alignment to show.
    assert tree.visible is False and alignment.visible is False
    # After Stop, the same stream says it was stopped instead.
    (stopped,) = _Elements(live.live_views(trace, plot=False, stopped=True)[0]).by_class("sv-run-state")
    assert "stopped" in stopped["text"] and "max new tokens" not in stopped["text"]


def test_the_inspector_opens_on_the_telling_position_and_clamps_rounds(trace):
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
    slider, story, radio, bars, stream, tree_box, *_ = inspector.inspect(trace, 10_000)
    assert slider.value == len(rounds) - 1 and stream.count('class="sv-round"') == len(rounds)
    rejected = next(i for i, e in enumerate(rounds) if any(d.decision == "rejected" for d in e.drafted))
    slider, story, radio, bars, stream, tree_box, tree, mask, alignment, source = inspector.inspect(trace, rejected)
    assert tree_box.visible is False and alignment.visible is False  # a chain round
    assert source.visible is False  # of a draft model: no draft-free source to show
    first_rejection = next(p for p, d in enumerate(rounds[rejected].drafted, 1) if d.decision == "rejected")
    assert radio.value == first_rejection and "rejected" in story
    assert bars.layout.title.text.startswith(f"Round {rounds[rejected].index}, position {first_rejection}")
    # A click carries data-round and data-pos; an out-of-range position falls back to the default.
    assert inspector.inspect(trace, rejected, 99)[2].value == first_rejection


def test_the_first_round_is_the_prefills_token_and_the_inspector_opens_after_it(trace):
    first = trace.events[0]
    assert first.k == 0 and not first.drafted and first.emitted is not None and first.positions
    story = html.unescape(inspector.inspect(trace, 0)[1])
    assert "prompt's prefill" in story and "the draft proposed" not in story and "accepted drafts" not in story
    assert first.emitted.text in story and "Result: 1 new token" in story
    i = inspector.first_drafted(trace)
    assert i >= 1 and trace.events[i].drafted and not any(e.drafted for e in trace.events[:i])
    assert inspector.inspect(trace, i)[0].value == i


def test_the_inspector_explains_itself_without_rounds(trace):
    plain = Trace.from_dict({**trace.to_dict(), "mode": "plain", "events": []})
    assert "Plain decoding has no rounds" in inspector.inspect(plain, 0)[1]
    assert "Run a generation" in inspector.inspect(None, 0)[1]


def test_theory_marks_the_run_and_fills_the_sliders_from_it(trace):
    text, tpr, speedup, heatmap, measured, tree_box, tree_text, tree_plot, pass_cost = theory_tab.views(
        0.7, 4, 40, 4, trace, None
    )
    # The run's own runtime's measured V(n), as V(n) / V(1), beside the n-passes diagonal.
    curve = next(t for t in pass_cost.data if t.name == trace.meta["runtime"])
    verify = {int(n): v for n, v in trace.meta["cost_model"]["verify"].items()}
    assert list(curve.x) == sorted(verify) and curve.y[0] == 1.0
    assert curve.y[-1] == pytest.approx(verify[max(verify)] / verify[1])
    assert tree_box.visible is False and tree_text == ""  # not a tree run
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
    # The measured point: the run's tokens per round (48 tokens over its rounds, the prefill's included).
    (point,) = [t for t in tpr.data if t.name == "measured"]
    assert point.y[0] == pytest.approx(trace.summary.new_tokens / len(rounds))
    # The sliders take the run's alpha (its mean overlap), its fixed k = 4, T and D measured at
    # load; the heat map marks the run at that (k, alpha).
    alpha, k, t, d = theory_tab.from_run(trace, None)
    assert (alpha, k) == (round(trace.summary.mean_overlap, 2), 4)
    assert t == max(1, round(trace.meta["cost_model"]["verify"]["1"])) and d >= 0
    (mark,) = [t for t in heatmap.data if t.name == "this run"]
    assert (mark.x[0], mark.y[0]) == (k, pytest.approx(alpha, abs=0.005))
    assert "Run a generation" in theory_tab.views(0.7, 4, 40, 4, None, None)[4]


def test_comparison_views_need_a_speculative_run(trace):
    assert "Run a generation in speculative mode" in compare.views(None, None)[0]
    table, identity, curve, spec_col, plain_col = compare.views(trace, None)
    assert "Run plain decoding" in table and spec_col and plain_col == ""
    assert (
        compare.plain_settings(trace).mode == "plain" and compare.plain_settings(trace).seed == trace.settings["seed"]
    )
    assert (
        trace.settings["runtime"] == "auto"
        and compare.plain_settings(trace).runtime == trace.meta["runtime"] == "torch"
    )


def test_real_position_distributions_are_distributions_and_run_the_lab(trace):
    event = next(e for e in trace.events if isinstance(e, RoundEvent) and e.drafted)
    p, q, labels = lossless_tab.position_distributions(event, 1)
    assert len(p) == len(q) == len(labels) and labels[-1] == "(all others)"
    assert math.isclose(sum(p), 1, abs_tol=1e-9) and math.isclose(sum(q), 1, abs_tol=1e-9)
    summary, freq, acc = lossless_tab.simulate_position(trace, event.index, 1, 10_000, 0)
    assert "draws" in summary and len(freq.data[0].y) == len(p)
    with pytest.raises(gr.Error, match="no draft to test"):
        lossless_tab.simulate_position(trace, event.index, len(event.drafted) + 1, 10_000, 0)


def test_the_lossless_lab_refuses_bad_distributions_in_words():
    with pytest.raises(gr.Error, match="sum to 1"):
        lossless_tab.simulate("0.5, 0.6", "0.5, 0.5", 1000, 0)
    summary, _, _ = lossless_tab.simulate(lossless_tab.DEFAULT_P, lossless_tab.DEFAULT_Q, 100_000, 0)
    assert "distributed as p" in summary


def test_a_trace_round_trips_through_download_and_upload(trace, tmp_path):
    assert traces.read_upload(traces.write_trace(trace)) == trace
    assert traces.save_for_download(None).interactive is False


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\xff\xfe not text", "not"), (b"{not json", "not JSON"), (json.dumps({"prompt": "x"}).encode(), "missing")],
)
def test_a_bad_upload_is_refused_in_words(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(gr.Error, match=message):
        traces.read_upload(str(path))


def test_an_uploaded_trace_fills_the_controls_that_can_show_it(trace):
    config = PageConfig(default_pair="qwen-coder", allow_custom=False)
    values = live.controls_from(trace, config)
    assert values[0] == trace.prompt
    assert values[1] is not trace.pair, "a pair the page does not offer is left alone"
    names = list(GenerationSettings().to_dict())
    shown = dict(zip(names, values[2:], strict=True))
    # every setting the trace ran with, so Run reruns it exactly (raw and the rest included)
    assert shown == {name: trace.settings[name] for name in names}
    raw = Trace.from_dict({**trace.to_dict(), "settings": {**trace.settings, "raw": True, "early_exit_layers": 2}})
    again = dict(zip(names, live.controls_from(raw, config)[2:], strict=True))
    assert again["raw"] is True and again["early_exit_layers"] == 2


def test_user_and_model_text_is_escaped(trace):
    state = LoadState(HOSTILE, True, error=HOSTILE)
    state.done.set()
    for shown in (
        status_html(HOSTILE, None),
        status_html(HOSTILE, state),
        traces.summary_html(Trace.from_dict({**trace.to_dict(), "prompt": HOSTILE, "pair": HOSTILE})),
    ):
        assert "<img" not in shown and "&lt;img" in shown


def test_a_message_quoting_user_input_is_shown_as_text():
    @shown_errors
    def handler(pair):
        raise UserError(f"unknown model pair {pair!r}: write 'DRAFT -> TARGET'")

    with pytest.raises(gr.Error) as err:
        handler("<b id=x>bold</b> &amp;")
    assert err.value.message == "unknown model pair '&lt;b id=x>bold&lt;/b> &amp;amp;': write 'DRAFT -> TARGET'"


def test_an_api_client_reads_messages_unescaped():
    from specviz.app.page import generate_api

    api = generate_api(PageConfig(default_pair="tiny", preload=False))
    with pytest.raises(gr.Error) as err:
        next(api("hello", pair="<b>x</b> & y"))
    assert "'<b>x</b> & y'" in err.value.message and "&lt;" not in err.value.message


@pytest.fixture(scope="module")
def tree_trace() -> Trace:
    return run(
        tiny_pair("close"),
        "for i in range(10):",
        GenerationSettings(drafter="tree", tree_nodes=8, tree_width=2, policy="fixed", k=8, max_new_tokens=32),
    )


def test_a_tree_round_shows_its_tree_and_mask_in_the_inspector_and_the_live_run(tree_trace):
    rounds = [e for e in tree_trace.events if isinstance(e, RoundEvent)]
    i = next(j for j, e in enumerate(rounds) if len(e.tree) == 8)
    *_, tree_box, tree, mask, alignment, _source = inspector.inspect(tree_trace, i)
    assert tree_box.visible is True and alignment.visible is False
    assert sum(len(t.x) for t in tree.data if t.name in ("accepted path", "rejected", "unchecked")) == 8
    assert len(mask.data[0].z) == 9  # the root and 8 nodes
    stream, stats, timeline, live_tree, live_alignment = live.live_views(tree_trace)
    last = [e for e in rounds if e.tree][-1]
    assert live_tree.visible is True and f"Latest round ({last.index})" in live_tree.value["plot"]
    assert live_alignment.visible is False
    assert (
        live.live_views(tree_trace, plot=False)[3:] == ({"__type__": "update"},) * 2
    )  # redrawn with the timeline only


def test_theory_says_whether_a_tree_pays(tree_trace):
    *_, tree_box, tree_text, tree_plot, _pass_cost = theory_tab.views(0.7, 4, 344, 132, tree_trace, None)
    assert tree_box.visible is True
    assert "A tree of 8 nodes" in tree_text and "a chain of 8 tokens" in tree_text and "V(9)" in tree_text
    assert "On this machine" in tree_text and "sibling rank" in tree_text
    assert [t.name for t in tree_plot.data] == ["chain of k", "tree of 8 nodes", "plain decoding"]


def test_a_cross_tokenizer_round_shows_its_alignment():
    from test_cross_vocab import cross_pair

    from specviz.costs.measure import for_pair

    pair = cross_pair()
    pair.cost_model = for_pair(tiny_pair("close"))  # the same target's costs
    cross = run(
        pair, "The quick brown fox", GenerationSettings(vocab_method="text", k=4, policy="fixed", max_new_tokens=12)
    )
    first = inspector.first_drafted(cross)
    assert first == 1 and not cross.events[0].drafted and cross.events[1].drafted
    *_, tree_box, tree, mask, alignment, _source = inspector.inspect(cross, first)
    assert tree_box.visible is False and alignment.visible is True and "sv-align-row" in alignment.value
    assert live.live_views(cross)[4].visible is True


def test_the_status_of_a_cross_tokenizer_pair_says_its_overlap_and_method():
    class Pair:
        name = "a pair without a draft head"  # ModelPair's name: the status looks up the target's head by it
        draft_precision = "float32"
        precision_choice = cost_model = runtime_choice = None
        info = {"vocab": {"method": "intersection", "overlap": 0.7712, "message": "<b>77.1%</b> shared"}}

    state = LoadState("p", True)
    state.pair = Pair()
    state.done.set()
    status = _Elements(status_html("p", state))
    (vocab,) = status.by_class("sv-vocab")
    # the overlap and the method in words; the check's own message as the tooltip, its markup
    # arriving as text (no <b> element made from it)
    assert "77.1%" in vocab["text"] and "(intersection)" in vocab["text"]
    assert vocab["title"] == "<b>77.1%</b> shared" and not [
        e for e in status.found if e["tag"] == "b" and "77.1%" in e["text"]
    ]
    Pair.info = {"vocab": {"method": "same", "identical": True}}
    assert not _Elements(status_html("p", state)).by_class("sv-vocab")
