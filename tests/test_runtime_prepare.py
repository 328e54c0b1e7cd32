"""The background timing of the runtime `auto` could not judge yet (engine.runtime_prepare):
a real child process that loads, times and records, the page's switch once it has, and the
status line's sentences."""

from __future__ import annotations

import dataclasses
import time

import pytest
from tiny_models import tiny_model, tiny_tokenizer

from specviz.app.loading import PairLoader
from specviz.cost_model import CostModel
from specviz.costs import runtime_choice
from specviz.engine import runtime_prepare

pytest.importorskip("llama_cpp")

WAIT_S = 300


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPECVIZ_RUNTIME", raising=False)
    monkeypatch.setattr(runtime_prepare, "_started", {})


def _wait(prep: runtime_prepare.Preparation) -> None:
    deadline = time.monotonic() + WAIT_S
    while prep.state == "running" and time.monotonic() < deadline:
        time.sleep(0.2)


def test_a_child_process_loads_times_and_records_the_runtime(tmp_path):
    folders = []
    for name, model in (("draft", tiny_model(1, layers=2)), ("target", tiny_model(0))):
        model.save_pretrained(tmp_path / name)
        tiny_tokenizer().save_pretrained(tmp_path / name)
        folders.append(str(tmp_path / name))
    spec = " -> ".join(folders)
    assert "torch" not in runtime_choice.recorded(spec)
    prep = runtime_prepare.start(spec, "torch")
    assert runtime_prepare.start(spec, "torch") is prep  # one per pair and runtime
    _wait(prep)
    assert prep.state == "done", prep.log.read_text()
    rates = runtime_choice.recorded(spec)["torch"]  # written by the child, read here
    assert rates["plain"] > 0 and rates["speculative"] > 0
    assert prep.last_line().startswith("torch timed: plain")


def test_a_preparation_that_cannot_load_fails_with_its_message():
    prep = runtime_prepare.start("no-such-pair-anywhere", "torch")
    _wait(prep)
    assert prep.state == "failed" and "could not be prepared" in prep.last_line()


def test_the_environment_turns_it_off():
    assert runtime_prepare.enabled({}) and not runtime_prepare.enabled({"SPECVIZ_PREPARE": "0"})


@dataclasses.dataclass
class _Pair:
    runtime: str
    runtime_choice: runtime_choice.Choice


def _auto_pair(runtime: str, spec: str = "qwen-coder") -> _Pair:
    return _Pair(runtime, runtime_choice.Choice(runtime, "not yet timed here", requested="auto", spec=spec))


FAST_FLAT = CostModel(verify={1: 40.0, 2: 41.0, 4: 43.0, 8: 47.0, 17: 60.0}, draft=8.0)
SLOW_STEEP = CostModel(verify={1: 30.0, 2: 60.0, 4: 120.0, 8: 240.0, 17: 510.0}, draft=18.0)


def test_an_auto_pair_switches_once_the_other_runtime_is_measured_faster(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    pair = _auto_pair("llama.cpp")
    assert runtime_prepare.switch_to(pair) is None  # torch not timed: nothing to switch to
    runtime_choice.record("qwen-coder", "llama.cpp", SLOW_STEEP)
    runtime_choice.record("qwen-coder", "torch", FAST_FLAT)
    assert runtime_prepare.switch_to(pair) == "torch"
    chosen = _Pair("llama.cpp", runtime_choice.Choice("llama.cpp", "chosen", requested="llama.cpp", spec="qwen-coder"))
    assert runtime_prepare.switch_to(chosen) is None  # asked for by name: never switched

    loads = []

    def load(name, *, with_draft, progress, runtime):
        loads.append(runtime)
        return _auto_pair("torch" if len(loads) > 1 else "llama.cpp")

    loader = PairLoader(load)
    first = loader.wait("qwen-coder")
    again = loader.wait("qwen-coder")
    assert first.runtime == "llama.cpp" and again.runtime == "torch" and loads == ["auto", "auto"]
    assert loader.wait("qwen-coder") is again and len(loads) == 2  # torch is what auto picks now: kept


def test_the_status_line_says_what_the_background_timing_found(monkeypatch):
    from specviz.app.page import preparation_sentence

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)

    class Done:
        runtime, state, log = "torch", "done", "x.log"

        def last_line(self):
            return ""

    pair = _auto_pair("llama.cpp")
    runtime_choice.record("qwen-coder", "llama.cpp", FAST_FLAT)
    runtime_choice.record("qwen-coder", "torch", SLOW_STEEP)
    assert "drafts no faster here: the pair stays on llama.cpp" in preparation_sentence(Done(), pair)
    runtime_choice.record("qwen-coder", "torch", CostModel(verify={1: 20.0, 2: 20.5, 17: 30.0}, draft=4.0))
    assert "drafts faster here: the next run loads the pair on it" in preparation_sentence(Done(), pair)


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_preparations_are_stopped_while_the_models_run_and_continued_after(tmp_path):
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        runtime_prepare._started[("p", "torch")] = runtime_prepare.Preparation("p", "torch", process, tmp_path / "log")
        seen = []

        @runtime_prepare.holding
        def run():
            seen.append(_state(process.pid))
            yield 1
            seen.append(_state(process.pid))

        @runtime_prepare.holding
        def outer():
            seen.append(_state(process.pid))
            assert list(run()) == [1]  # a nested run: still stopped when it ends
            seen.append(_state(process.pid))

        outer()
        time.sleep(0.2)
        assert seen == ["T", "T", "T", "T"] and _state(process.pid) != "T"
    finally:
        process.kill()
        process.wait()
