"""Unloading loaded pairs (`lm.resident`, `ModelPair.close`) on the torch runtime: an unloaded
pair's models are freed, the least recently used idle pairs go when the loaded models exceed
the budget, and a pair a run is using is never unloaded under it."""

from __future__ import annotations

import gc
import weakref

import pytest
from tiny_models import tiny_model, tiny_tokenizer

from specviz import engine
from specviz.errors import UserError
from specviz.lm import clear_loaded, load_pair, resident
from specviz.settings import GenerationSettings


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECVIZ_DEVICE", "cpu")
    monkeypatch.setenv("SPECVIZ_DTYPE", "float32")
    monkeypatch.delenv(resident.ENV, raising=False)
    monkeypatch.delenv("SPECVIZ_MEMORY_BUDGET_GB", raising=False)
    clear_loaded()
    resident.unload_others()  # pairs earlier tests loaded on other runtimes
    yield
    clear_loaded()


@pytest.fixture
def folders(tmp_path):
    out = []
    for name, model in (("a", tiny_model(0)), ("b", tiny_model(1)), ("c", tiny_model(2))):
        model.save_pretrained(tmp_path / name)
        tiny_tokenizer().save_pretrained(tmp_path / name)
        out.append(str(tmp_path / name))
    return out


def test_closing_a_pair_frees_its_models_and_the_next_request_loads_it_again(folders):
    pair = load_pair(f"{folders[1]} -> {folders[0]}", int8_draft=False)
    target, draft = weakref.ref(pair.target), weakref.ref(pair.draft)
    assert [name for name, *_ in resident.loaded()] == [pair.name]
    assert pair.close() and pair.closed and resident.loaded() == []
    del pair
    gc.collect()
    assert target() is None and draft() is None  # nothing in the process holds them any more
    again = load_pair(f"{folders[1]} -> {folders[0]}", int8_draft=False)
    assert not again.closed and engine.run(again, "hi", GenerationSettings(max_new_tokens=3)).token_ids


def _bytes(folder: str) -> int:
    pair = load_pair(folder, with_draft=False)
    n = resident.held_bytes()
    pair.close()
    return n


def test_past_the_budget_the_least_recently_used_idle_pair_is_unloaded(folders, monkeypatch):
    one = _bytes(folders[0])
    monkeypatch.setenv(resident.ENV, str(int(2.5 * one)))  # room for two tiny targets, not three
    a = load_pair(folders[0], with_draft=False)
    b = load_pair(folders[1], with_draft=False)
    with resident.using(a):  # a run on a: now the most recently used
        pass
    c = load_pair(folders[2], with_draft=False)
    assert b.closed and not a.closed and not c.closed
    assert {name for name, *_ in resident.loaded()} == {a.name, c.name}
    assert resident.held_bytes() <= 2.5 * one


def test_a_pair_in_use_is_never_unloaded_under_it(folders, monkeypatch):
    one = _bytes(folders[0])
    monkeypatch.setenv(resident.ENV, str(int(1.5 * one)))  # room for one
    a = load_pair(folders[0], with_draft=False)
    generation = engine.start(a, "hi", GenerationSettings(mode="plain", max_new_tokens=4))
    events = iter(generation)
    next(events)  # a run on a is under way
    b = load_pair(folders[1], with_draft=False)
    assert not a.closed and not b.closed  # over the budget for now: a is in use
    assert resident.unload_others(keep=b) == [a.name] and not a.closed
    assert not a.close() and a.close(force=False) is False
    list(events)  # the run ends and releases a
    assert generation.trace().summary.stop_reason and a.close() and a.closed


@pytest.mark.parametrize("value", ["abc", "0", "-5"])
def test_a_bad_budget_is_refused_in_one_line(value):
    with pytest.raises(UserError, match=resident.ENV):
        resident.budget_bytes({resident.ENV: value})
