"""Each runtime's pass costs in a trace (`meta["runtime_costs"]`): a run writes them as
`CostModel.to_dict` does, a trace that kept them as {"V", "D"} is read in that shape at load,
and both draw the same figure, V(n) / V(1) by runtime."""

import dataclasses
import json
from pathlib import Path

import pytest
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

from specviz import engine
from specviz.cost_model import CostModel
from specviz.costs import runtime_choice
from specviz.events import Trace, load_trace
from specviz.settings import GenerationSettings
from specviz.viz import pass_cost_figure, runtime_curves

DATA = Path(__file__).parent / "data"


def curves_of(fig) -> dict:
    return {t.name: t for t in fig.data}


def test_pass_costs_are_drawn_per_runtime_in_one_token_passes():
    curves = {
        "llama.cpp": CostModel(verify={1: 80.0, 2: 120.0, 4: 200.0}, draft=40.0),
        "torch": CostModel(verify={1: 100.0, 8: 130.0}, draft=30.0),
    }
    by_name = curves_of(pass_cost_figure(curves, current="torch"))
    assert list(by_name["llama.cpp"].y) == [1.0, 1.5, 2.5]  # 120 / 80, 200 / 80
    assert list(by_name["torch"].x) == [1, 8] and list(by_name["torch"].y) == [1.0, 1.3]
    assert list(by_name["n one-token passes"].y) == [1, 8]  # the diagonal up to the largest n
    assert by_name["torch"].line.width > by_name["llama.cpp"].line.width
    assert pass_cost_figure({}).layout.annotations  # nothing timed yet: says so


def test_a_trace_that_kept_v_and_d_still_loads_and_draws():
    d = json.loads((DATA / "viz_trace_greedy.json").read_text())
    d["meta"].update(
        runtime="llama.cpp",
        runtime_costs={
            "llama.cpp": {"V": {"1": 80.0, "2": 120.0, "4": 200.0}, "D": 40.0},
            "torch": {"V": {"1": 100.0, "8": 130.0}, "D": 30.0},
        },
    )
    trace = load_trace(json.dumps(d))
    assert trace.meta["runtime_costs"]["torch"] == {"verify": {"1": 100.0, "8": 130.0}, "draft": 30.0}
    by_name = curves_of(pass_cost_figure(*runtime_curves(trace)))
    assert list(by_name["llama.cpp"].x) == [1, 2, 4] and list(by_name["llama.cpp"].y) == [1.0, 1.5, 2.5]
    assert [list(c) for c in by_name["llama.cpp"].customdata] == [[80.0, 40.0], [120.0, 40.0], [200.0, 40.0]]
    assert list(by_name["torch"].y) == [1.0, 1.3] and by_name["torch"].customdata[0][1] == 30.0
    assert by_name["llama.cpp"].line.width > by_name["torch"].line.width  # the runtime it ran on


@pytest.mark.usefixtures("single_thread")
def test_a_run_writes_each_runtimes_costs_as_a_cost_model_and_draws_them():
    torch_cost = CostModel(verify={1: 100.0, 2: 110.0, 4: 150.0}, draft=10.0)
    lcpp_cost = CostModel(verify={1: 50.0, 4: 200.0}, draft=5.0)
    rates = {"torch": runtime_choice.rates(torch_cost), "llama.cpp": runtime_choice.rates(lcpp_cost)}
    pair = dataclasses.replace(
        tiny_pair(None), cost_model=torch_cost, runtime_choice=runtime_choice.Choice("torch", "chosen", rates=rates)
    )
    trace = engine.run(pair, "Hello", GenerationSettings(mode="plain", max_new_tokens=2))
    kept = trace.meta["runtime_costs"]
    assert kept["torch"] == {
        "verify": {"1": 100.0, "2": 110.0, "4": 150.0},
        "draft": 10.0,
        "source": "measured",
        "meta": {},
    }
    assert kept["llama.cpp"] == {"verify": {"1": 50.0, "4": 200.0}, "draft": 5.0, "source": "measured", "meta": {}}
    by_name = curves_of(pass_cost_figure(*runtime_curves(Trace.from_json(trace.to_json()))))
    assert list(by_name["torch"].y) == [1.0, 1.1, 1.5] and list(by_name["llama.cpp"].y) == [1.0, 4.0]


def test_a_runtime_kept_with_v_and_d_reads_as_timed_and_one_without_costs_as_untimed(tmp_path, monkeypatch):
    # Rates kept on a machine before costs took one shape are read, not timed again at every load.
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    kept = runtime_choice.record("tiny", "torch", CostModel(verify={1: 100.0, 2: 110.0}, draft=10.0))
    path = next(tmp_path.rglob("*.json"))
    old = {"plain": 20.0, "speculative": 15.0, "k": 1, "alpha": 0.8, "V": {"1": 50.0, "2": 80.0}, "D": 5.0}
    path.write_text(json.dumps({"torch": kept, "llama.cpp": old, "torch-extra": {"plain": 1.0}}))
    read = runtime_choice.recorded("tiny")
    assert list(read) == ["torch", "llama.cpp"]
    assert read["llama.cpp"]["cost"] == {"verify": {"1": 50.0, "2": 80.0}, "draft": 5.0}
    assert read["llama.cpp"]["plain"] == 20.0
    path.write_text(json.dumps({"torch": kept, "llama.cpp": {"plain": 20.0, "speculative": 15.0}}))
    assert list(runtime_choice.recorded("tiny")) == ["torch"]
