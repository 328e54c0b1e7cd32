"""The labs tab's views on a recorded trace, and the handlers of its labs that run the pair
(workshop/labs/panels.py) on the tiny pair."""

from pathlib import Path

import plotly.graph_objects as go
import pytest
from app_server import save_tiny_pair
from tiny_models import single_thread  # noqa: F401  (a fixture)

from specviz.app import labs_tab
from specviz.app.config import PageConfig
from specviz.events import Trace
from specviz.workshop.labs import panels

pytestmark = pytest.mark.usefixtures("single_thread")

DATA = Path(__file__).parent / "data"
# A cost model with V(n) = 80 + 20 n ms and D = 10 ms, as a trace would carry it.
COST = {"verify": {str(n): 80.0 + 20 * n for n in range(1, 18)}, "draft": 10.0, "source": "measured", "meta": {}}


def greedy_trace() -> Trace:
    return Trace.from_json((DATA / "viz_trace_greedy.json").read_text())


def test_views_of_a_recorded_run_without_a_cost_model():
    rates, lengths, words, hindsight, hindsight_words, _ = labs_tab.views(greedy_trace())
    # The recorded run: 22 rounds; 12 lost their first draft, 5 kept one, 3 kept two, one kept
    # three and one all four; 18 of 38 judged drafts accepted.
    assert isinstance(rates, go.Figure) and len(rates.data) == 4
    assert list(rates.data[0].y) == pytest.approx([10 / 22, 5 / 9, 2 / 5, 1 / 2])
    assert list(lengths.data[0].y) == [12, 5, 3, 1, 1]
    assert "0.47" in lengths.data[1].name  # alpha = 18 / 38
    assert "with the bonus token" in words
    assert len(hindsight.data) == 0 and "no cost model" in hindsight_words


def test_views_use_the_cost_model_a_trace_carries():
    trace = greedy_trace()
    trace.meta["cost_model"] = COST
    _, _, _, hindsight, words, pass_costs = labs_tab.views(trace)
    assert len(hindsight.data[2].y) == 22 and "tokens/s" in words
    # the trace's own cost model, drawn as its runtime's: V(n) = 80 + 20 n in one-token passes of 100 ms
    (torch_curve,) = [t for t in pass_costs.data if t.name == "torch"]
    assert list(torch_curve.y)[:3] == pytest.approx([1.0, 1.2, 1.4])


def test_the_pass_costs_show_every_runtime_a_run_measured():
    trace = greedy_trace()
    trace.meta.update(
        runtime="llama.cpp",
        runtime_costs={
            "llama.cpp": {"verify": {"1": 80.0, "8": 360.0}, "draft": 40.0},
            "torch": {"verify": {"1": 300.0, "8": 330.0}, "draft": 70.0},
        },
    )
    pass_costs = labs_tab.views(trace)[-1]
    curves = {t.name: list(t.y) for t in pass_costs.data}
    assert curves["llama.cpp"] == pytest.approx([1.0, 4.5]) and curves["torch"] == pytest.approx([1.0, 1.1])


def test_views_without_a_speculative_run():
    out = labs_tab.views(None)
    assert out[2] == labs_tab.NO_RUN and len(out[0].data) == 0


def test_the_run_k_is_the_mean_drafted_length():
    # 20 rounds of 4, one of 3, one of 1: 84 / 22 = 3.8 -> 4
    assert panels.run_k(greedy_trace()) == 4


def test_the_handlers_run_on_the_tiny_pair(tmp_path):
    spec = save_tiny_pair(tmp_path)
    labs = panels.Labs(PageConfig(default_pair=spec, preload=False))
    trace = greedy_trace()
    updates = list(labs.sweep(trace, spec, "0,1", None, progress=lambda *a, **k: None))
    assert len(updates) == 2  # one redraw per temperature
    fig, words = updates[-1]
    assert list(fig.data[0].x) == [0.0, 1.0] and "T = 1" in words
    plot, costs, text = labs.batching(trace, spec, None, progress=lambda *a, **k: None)
    assert [int(x) for x in plot.data[0].x] == [1, 2, 4, 8]
    assert len(costs.data) == 5  # four batch sizes and the n-times line
    assert "\u03b1 = 0.47" in text and "GB/s" in text


def test_on_zero_gpu_the_labs_pass_only_plain_values_to_the_gpu_functions(tmp_path, monkeypatch):
    # ZeroGPU runs a GPU function in another process: what crosses either way must pickle,
    # so no progress callback goes along there, and the handlers still finish.
    import pickle

    spec = save_tiny_pair(tmp_path)
    calls = []

    def crossing(fn):
        def call(*args):
            pickle.dumps(args)  # raises on a lambda, a model or a lock
            calls.append(fn.__name__)
            out = fn(*args)
            pickle.dumps(out)  # and the answer crosses back
            return out

        return call

    monkeypatch.setattr(panels.zero_gpu, "ON_ZERO_GPU", True)
    monkeypatch.setattr(panels, "SWEEP_POINT", crossing(panels._sweep_point))
    monkeypatch.setattr(panels, "BATCH_COSTS", crossing(panels._batch_costs))
    labs = panels.Labs(PageConfig(default_pair=spec, preload=False))
    updates = list(labs.sweep(greedy_trace(), spec, "0,1", None, progress=lambda *a, **k: None))
    assert list(updates[-1][0].data[0].x) == [0.0, 1.0]
    plot, _, _ = labs.batching(greedy_trace(), spec, None, progress=lambda *a, **k: None)
    assert [int(x) for x in plot.data[0].x] == [1, 2, 4, 8]
    assert calls == ["_sweep_point", "_sweep_point", "_batch_costs"]


def test_the_handlers_ask_for_a_run_first(tmp_path):
    import gradio as gr

    labs = panels.Labs(PageConfig(preload=False))
    with pytest.raises(gr.Error, match="run a generation"):
        list(labs.sweep(None, "x", "0", None, progress=lambda *a, **k: None))
    with pytest.raises(gr.Error, match="temperatures must be numbers separated by commas"):
        list(labs.sweep(greedy_trace(), "x", "0,warm", None, progress=lambda *a, **k: None))
