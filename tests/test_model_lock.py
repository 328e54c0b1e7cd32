"""One pass of the models at a time (`engine.model_lock`): a run still finishing its pass after
its request went away never overlaps the next run's; the wait is bounded and ends on Stop."""

from __future__ import annotations

import threading
import time

import pytest
from tiny_models import single_thread, tiny_pair  # noqa: F401

from specviz import engine
from specviz.engine import model_lock
from specviz.errors import UserError
from specviz.lm.interrupt import Interrupted
from specviz.lm.torch_runtime.lean import LeanLM
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.usefixtures("single_thread")

WAIT_S = 20.0  # generous: these tests wait for events, never for speed
GREEDY = GenerationSettings(max_new_tokens=8, k=3, policy="fixed")
PROMPT = "Write a function that reverses a string"


def test_a_second_run_starts_only_after_the_first_runs_pass_ends(monkeypatch):
    pair = tiny_pair("close")
    first, second = engine.start(pair, PROMPT, GREEDY), engine.start(pair, PROMPT, GREEDY)
    log, in_pass, release = [], threading.Event(), threading.Event()
    original = LeanLM._pass

    def spy(self, *args):
        name = threading.current_thread().name
        log.append((name, "start", time.monotonic()))
        if name == "first" and not release.is_set():
            in_pass.set()
            release.wait(WAIT_S)  # a long pass, still running when the second run begins
        out = original(self, *args)
        log.append((name, "end", time.monotonic()))
        return out

    monkeypatch.setattr(LeanLM, "_pass", spy)
    threads = [threading.Thread(target=lambda g=g: list(g), name=n) for n, g in (("first", first), ("second", second))]
    threads[0].start()
    assert in_pass.wait(WAIT_S)
    threads[1].start()
    time.sleep(0.5)
    assert not [e for e in log if e[0] == "second"]  # waiting for the models, not running
    release.set()
    for t in threads:
        t.join(WAIT_S)
    first_end = next(t for n, what, t in log if n == "first" and what == "end")
    second_start = next(t for n, what, t in log if n == "second" and what == "start")
    assert second_start >= first_end
    assert first.trace().summary.stop_reason and second.trace().summary.stop_reason == first.trace().summary.stop_reason


def _hold_models(held: threading.Event, release: threading.Event) -> threading.Thread:
    def hold():
        with model_lock.models():
            held.set()
            release.wait(WAIT_S)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(WAIT_S)
    return thread


def test_the_wait_for_the_models_is_bounded_and_says_so_in_one_line():
    held, release = threading.Event(), threading.Event()
    thread = _hold_models(held, release)
    try:
        start = time.monotonic()
        busy = r"^the models were still busy .* after 0.3 s \(SPECVIZ_MODEL_WAIT_S\)"
        with pytest.raises(UserError, match=busy) as e:
            with model_lock.models(wait=0.3):
                pass
        assert "\n" not in str(e.value) and time.monotonic() - start < 5.0
    finally:
        release.set()
        thread.join(WAIT_S)
    with model_lock.models(wait=0.3):  # free again
        pass


def test_stop_ends_the_wait_for_the_models():
    held, release = threading.Event(), threading.Event()
    thread = _hold_models(held, release)
    stop = threading.Event()
    try:
        pair = tiny_pair("close")
        generation = engine.start(pair, PROMPT, GREEDY, should_stop=stop.is_set)
        threading.Timer(0.3, stop.set).start()
        assert list(generation) == [] and generation.trace().summary.stop_reason == "cancelled"
        with pytest.raises(Interrupted):
            with model_lock.models(lambda: "cancelled", wait=WAIT_S):
                pass
    finally:
        release.set()
        thread.join(WAIT_S)


@pytest.mark.parametrize("value", ["0", "-3", "abc", "99999"])
def test_a_bad_wait_setting_is_refused_in_one_line(value):
    with pytest.raises(UserError, match="SPECVIZ_MODEL_WAIT_S"):
        model_lock.wait_s({"SPECVIZ_MODEL_WAIT_S": value})
