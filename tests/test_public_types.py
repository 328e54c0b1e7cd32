"""A public page's declared types, uploads held in memory and server details, without launching
it (tests/test_hostile.py sends the same cases to the launched page):

- every API endpoint's (and so every MCP tool's) declared numbers, whole numbers, texts and
  flags are checked as a request joins the queue, in one line naming the parameter that never
  repeats what came;
- the memory that uploaded traces hold, all sessions together, is bounded before a file is read;
- a trace, a rate, an export and the header handed to a visitor of a public page name no path,
  CPU model or library version of the server.
"""

from __future__ import annotations

import gc
import json
import math
import time
from pathlib import Path

import pytest
from gradio.components.api_component import Api

from specviz.app import declared, held, server_details
from specviz.app.config import PageConfig
from specviz.app.page import build_page
from specviz.errors import UserError
from specviz.events import Trace, TraceError, load_trace
from specviz.limits import LimitError

ROOT = Path(__file__).resolve().parents[1]
HUGE_LIST = [0.5] * 400_000
GOOD = {frozenset([declared.TEXT]): "x", frozenset([declared.NUMBER]): 1.0, frozenset([declared.WHOLE]): 1}


# --- declared types ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoints():
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    return {fn.api_name: fn for fn in demo.fns.values() if fn.inputs and all(isinstance(c, Api) for c in fn.inputs)}


def verdicts(fn, values: list) -> list[str]:
    return [v["message"] for v in fn.validator(*values) if v["is_valid"] is False]


@pytest.mark.parametrize(
    "value, got",
    [
        (HUGE_LIST, "a list of 400,000 items"),
        ({"a": 1, "b": 2}, "an object of 2 keys"),
        ("0.8" * 100_000, "a string of 300,000 characters"),
        (math.nan, "NaN"),
        (math.inf, "infinity"),
        (-math.inf, "-infinity"),
        (True, "true"),
        (None, "null"),
    ],
)
def test_a_declared_number_refuses_anything_else_in_one_short_line(endpoints, value, got):
    good = {"alpha": 0.8, "k": 4, "target_ms": 30.0, "draft_ms": 5.0}
    for name in good:
        values = list({**good, name: value}.values())
        message = "a whole number" if name == "k" else "a number"
        assert verdicts(endpoints["speedup"], values) == [f"{name} must be {message}; got {got}"]
    assert verdicts(endpoints["speedup"], list(good.values())) == []


def test_every_endpoint_is_guarded_and_each_declared_number_refuses_a_list(endpoints):
    assert {"generate", "generate_summary", "speedup", "best_k", "lossless_check", "read_metrics"} <= set(endpoints)
    checked = 0
    for name, fn in endpoints.items():
        assert fn.validator is not None, name
        params = declared.get_function_params(fn.fn)
        good = [default if has else GOOD[declared.kinds(hint)] for _, has, default, hint in params]
        assert verdicts(fn, good) == [], name
        for i, (param, *_, hint) in enumerate(params):
            if declared.kinds(hint) & {declared.NUMBER, declared.WHOLE}:
                start = time.perf_counter()
                lines = verdicts(fn, good[:i] + [HUGE_LIST] + good[i + 1 :])
                assert time.perf_counter() - start < 1.0
                assert len(lines) == 1 and lines[0].startswith(f"{param} must be "), (name, param, lines)
                assert len(lines[0]) < 200 and "0.5" not in lines[0]
                checked += 1
    assert checked >= 20  # generate's settings, the theory's tools, the lossless lab's, read_metrics'


def test_a_whole_number_takes_what_a_browser_sends_and_refuses_a_fraction(endpoints):
    fn = endpoints["best_k"]
    assert verdicts(fn, [0.8, 30, 5, 16.0]) == []
    assert verdicts(fn, [0.8, 30, 5, 16.5]) == ["k_max must be a whole number; got 16.5"]
    assert verdicts(fn, [0.8, 30, 5, 10**40]) == []  # a size: its own limit refuses it (SPECVIZ_MAX_K)


def test_a_declared_text_refuses_a_list_and_an_optional_number_takes_null(endpoints):
    fn = endpoints["generate"]
    params = [p for p, *_ in declared.get_function_params(fn.fn)]
    values = [default for _, _, default, _ in declared.get_function_params(fn.fn)]
    values[0] = "hello"
    assert verdicts(fn, values) == []  # k is None: the policy's default
    values[params.index("prompt")] = ["x"] * 1000
    assert verdicts(fn, values) == ["prompt must be a string; got a list of 1,000 items"]


def test_a_refusal_shows_a_long_value_cut_short():
    from specviz.app import tools

    with pytest.raises(UserError) as e:
        tools.whole([1] * 400_000, "k")
    assert len(str(e.value)) < 200


# --- uploads held in memory --------------------------------------------------------------------


def recorded() -> dict:
    return json.loads((ROOT / "tests" / "data" / "viz_trace_greedy.json").read_text())


def test_trace_metrics_and_notes_are_typed_and_bounded():
    d = recorded()
    d["metrics"] = {"anything": ["ab"] * 10_000}
    with pytest.raises(TraceError, match=r"^trace\.metrics\.anything: Extra inputs are not permitted$"):
        load_trace(json.dumps(d))
    d["metrics"] = {}
    d["meta"]["notes"] = ["ab"] * 10_000
    with pytest.raises(TraceError, match=r"^trace\.meta\.notes: a list of 10000 items; the limit is 64$"):
        load_trace(json.dumps(d))
    d["meta"] = {f"n{i}": 1 for i in range(1000)}
    with pytest.raises(TraceError, match=r"^trace\.meta: 1000 notes; the limit is 64$"):
        load_trace(json.dumps(d))
    d["meta"] = {"key": {"a": {"b": {"c": {"d": 1}}}}}
    with pytest.raises(TraceError, match="nested too deeply"):
        load_trace(json.dumps(d))


def test_uploads_are_counted_while_their_traces_live_and_refused_past_the_bound(monkeypatch):
    monkeypatch.setenv("SPECVIZ_MAX_UPLOADS_MEMORY", str(held.PER_BYTE * 1_000_000 + held.held_bytes()))
    before = held.held_bytes()
    data = json.dumps(recorded()).encode()
    with held.counted(len(data)) as keep:
        trace = load_trace(data)
        keep(trace)
    assert held.held_bytes() == before + held.PER_BYTE * len(data)
    with pytest.raises(LimitError, match=r"the limit is [\d,]+ bytes \(SPECVIZ_MAX_UPLOADS_MEMORY\)$"):
        with held.counted(1_000_000):
            pytest.fail("read although over the bound")
    del trace
    gc.collect()
    assert held.held_bytes() == before  # dropped with its trace
    with held.counted(10):  # a failed read keeps nothing counted
        pass
    assert held.held_bytes() == before


# --- server details ------------------------------------------------------------------------------


def run_trace() -> Trace:
    d = recorded()
    key = {"hardware": "AMD EPYC 7763 64-Core Processor", "torch": "2.13.0", "target": {"file": ["/srv/m/t.gguf", 9]}}
    cost = {"verify": {"1": 30.0, "5": 40.0}, "draft": 5.0, "source": "measured", "meta": {"key": key}}
    d["meta"].update(cost_model=cost, runtime_costs={"torch": cost}, policy_costs=cost, secret="/srv/x/y")
    d["pair"] = "/srv/models/draft -> /srv/models/target"
    return Trace.from_dict(d)


@pytest.fixture
def public():
    server_details.hide_details(True)
    yield
    server_details.hide_details(False)


def test_a_public_page_hands_out_traces_and_rates_without_server_details(public):
    trace = run_trace()
    text = server_details.for_visitors(trace).to_json()
    for detail in ("/srv", "EPYC", "2.13.0", "secret"):
        assert detail not in text, detail
    assert server_details.for_visitors(trace).meta["cost_model"]["verify"] == {"1": 30.0, "5": 40.0}
    assert "EPYC" in trace.to_json()  # the run's own trace keeps them
    rates = {"torch": {"plain": 30.0, "cost": trace.meta["cost_model"]}}
    assert "EPYC" not in json.dumps(server_details.plain_rates(rates))
    command = server_details.file_names("llama-server -m /root/.cache/specviz/qwen.gguf --port 8080")
    assert command == "llama-server -m qwen.gguf --port 8080"


def test_a_local_page_keeps_them():
    trace = run_trace()
    assert server_details.for_visitors(trace) is trace
    assert server_details.file_names("-m /root/x/q.gguf") == "-m /root/x/q.gguf"


def test_the_header_shows_no_log_line_or_path_on_a_public_page(public, tmp_path):
    from types import SimpleNamespace

    from specviz.app import page

    log = tmp_path / "prepare.log"
    log.write_text("error: /srv/secret/llama.cpp/build failed with gcc 14.2\n")
    prep = SimpleNamespace(state="failed", runtime="llama.cpp", log=log, last_line=lambda: log.read_text().strip())
    assert page.preparation_sentence(prep, None) == "llama.cpp could not be prepared here"
    assert "/srv" not in page.status_html("/srv/models/draft -> /srv/models/target", None)
    server_details.hide_details(False)
    assert "gcc 14.2" in page.preparation_sentence(prep, None)  # a local page says why


def test_a_page_events_inputs_are_checked_by_their_components():
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    views = next(
        fn
        for fn in demo.fns.values()
        if fn.api_name == "views" and any(c.__class__.__name__ == "Slider" for c in fn.inputs)
    )
    good = [0.8, 4, 40, 4, None, None][: len(views.inputs)]
    assert declared.component_refusal(views, good) is None
    why = declared.component_refusal(views, [HUGE_LIST, *good[1:]])
    assert why.endswith("must be a number; got a list of 400,000 items") and len(why) < 200
    assert declared.component_refusal(views, [math.nan, *good[1:]]).endswith("got NaN")


def test_a_menu_takes_its_choices_and_refuses_anything_else_without_repeating_it():
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    simulate = next(fn for fn in demo.fns.values() if fn.api_name == "simulate")
    assert declared.component_refusal(simulate, ["0.5,0.5", "0.9,0.1", 1_000_000, 0]) is None
    why = declared.component_refusal(simulate, ["0.5,0.5", "0.9,0.1", "9" * 1_000_000, 0])
    assert why.endswith("choices; got a string of 1,000,000 characters") and len(why) < 200
    assert "choices; got true" in declared.component_refusal(simulate, ["0.5,0.5", "0.9,0.1", True, 0])
