"""The page's background loader and per-session Stop flags (no models: the load is a function)."""

import threading
import time

import pytest

from specviz.app.loading import Cancelled, PairLoader
from specviz.app.stopping import StopFlags
from specviz.errors import UserError


def test_wait_reports_progress_and_returns_the_pair():
    release = threading.Event()
    calls = []

    def load(name, *, with_draft, progress, runtime):
        progress(0.5, "halfway")
        release.wait(5)
        calls.append((name, with_draft, runtime))
        return f"pair {name} on {runtime}"

    loader = PairLoader(load)
    seen = []
    loader.request("a")
    threading.Timer(0.3, release.set).start()
    pair = loader.wait("a", on_progress=lambda f, m: seen.append((f, m)), poll_s=0.05)
    assert pair == "pair a on auto" and calls == [("a", True, "auto")]
    assert (0.5, "halfway") in seen
    assert loader.status("a").ready
    assert loader.wait("a", with_draft=False) == "pair a on auto"  # a pair with its draft serves both
    assert len(calls) == 1
    # Another runtime is another load, and the status follows the runtime asked for last.
    release.set()
    assert loader.wait("a", runtime="llama.cpp", poll_s=0.01) == "pair a on llama.cpp"
    assert calls[-1] == ("a", True, "llama.cpp") and loader.status("a").runtime == "llama.cpp"


def test_a_failed_load_keeps_its_message_and_the_next_request_retries():
    attempts = []

    def load(name, *, with_draft, progress, runtime):
        attempts.append(name)
        if len(attempts) == 1:
            raise UserError("no such model")
        return "ok"

    loader = PairLoader(load)
    with pytest.raises(UserError, match="no such model"):
        loader.wait("x", poll_s=0.01)
    assert loader.status("x").error == "no such model"
    assert loader.wait("x", poll_s=0.01) == "ok"


def test_a_bug_while_loading_becomes_a_message_not_a_hang():
    def load(name, *, with_draft, progress, runtime):
        raise RuntimeError("boom")

    with pytest.raises(UserError, match="could not load y: RuntimeError: boom"):
        PairLoader(load).wait("y", poll_s=0.01)


def test_stop_while_waiting_cancels():
    release = threading.Event()
    loader = PairLoader(lambda name, **_: release.wait(5))
    with pytest.raises(Cancelled):
        loader.wait("slow", should_stop=lambda: True, poll_s=0.01)
    release.set()


def test_a_new_run_stops_the_previous_one_in_the_same_session_only():
    flags = StopFlags()
    first = flags.begin("s1")
    other = flags.begin("s2")
    second = flags.begin("s1")
    assert first.is_set() and not second.is_set() and not other.is_set()
    flags.stop("s1")
    assert second.is_set() and not other.is_set()
    flags.finish("s1", second)
    flags.stop("s1")  # nothing running: a no-op
    assert not other.is_set()


def test_after_stop_a_run_sends_no_round_that_shows_it_running(monkeypatch):
    # A round that ends after Stop was pressed (its flag set) would draw the stream as running
    # again over the stopped one; only the finished trace, which says it was stopped, goes out.
    from types import SimpleNamespace

    from specviz.app import runner
    from specviz.app.config import PageConfig

    def trace(reason: str = ""):
        return SimpleNamespace(summary=SimpleNamespace(stop_reason=reason), token_ids=[])

    before, after, finished = trace(), trace(), trace("cancelled")

    def generate(*args, **kwargs):  # the pauses let each round reach the stream before the next
        yield before
        time.sleep(0.2)
        runner.FLAGS.stop("s")  # Stop pressed while the next round runs
        yield after
        time.sleep(0.3)
        yield finished

    monkeypatch.setattr(runner, "check_pair", lambda name, config: name)
    monkeypatch.setattr(runner, "LOADER", SimpleNamespace(wait=lambda *a, **k: None))
    monkeypatch.setattr(runner, "_generate", generate)
    from specviz.settings import GenerationSettings

    sent = list(runner.stream("p", "x", GenerationSettings(), "s", PageConfig(preload=False), min_interval_s=0.0))
    assert sent == [before, finished]


def test_an_unloaded_pair_is_forgotten_and_loaded_again_when_asked_for():
    from types import SimpleNamespace

    loads = []

    def load(name, *, with_draft, progress, runtime):
        loads.append(name)
        return SimpleNamespace(name=name, closed=False)

    loader = PairLoader(load, switch=lambda pair: None)
    a, b = loader.wait("a", poll_s=0.01), loader.wait("b", poll_s=0.01)
    a.closed = True  # unloaded to free memory (ModelPair.close)
    assert loader.wait("b", poll_s=0.01) is b
    assert loader.status("a") is None  # its state (which held the models) is gone
    again = loader.wait("a", poll_s=0.01)
    assert again is not a and not again.closed and loads == ["a", "b", "a"]


def test_settling_the_heap_freezes_what_lives_and_an_unload_frees_the_cycles_it_left(monkeypatch):
    import gc
    import weakref

    from specviz.lm import resident

    monkeypatch.setattr(resident, "_settled", False)  # as in a page before it is built

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return a

    kept = cycle()  # a loaded pair's objects: alive, so frozen out of the collector's walks
    gone = weakref.ref(cycle())  # garbage in a cycle when the heap settles: collected first
    frozen = gc.get_freeze_count()
    resident.settle_heap()
    assert gone() is None and gc.get_freeze_count() > frozen
    # The pair is unloaded: its cycle is garbage now, but frozen, so a plain collection keeps it;
    # the collection an unload runs (resident.collect) frees it.
    was = weakref.ref(kept)
    del kept
    gc.collect()
    assert was() is not None
    resident.collect()
    assert was() is None and gc.get_freeze_count() > 0
