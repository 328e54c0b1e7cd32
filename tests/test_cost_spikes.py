"""A pass size timed at a busy moment is timed again before the costs are kept
(costs/measure.py, `spikes`): one spike, cached, would price every later load, since the
curve is never cheaper with more tokens and spreads it to every larger size."""

from __future__ import annotations

from types import SimpleNamespace

from specviz.costs import measure

QUIET = {1: 30.0, 2: 36.0, 3: 41.0, 4: 47.0, 5: 55.0}


def test_a_size_dearer_than_its_one_token_passes_or_a_larger_pass_is_a_spike():
    assert measure.spikes(QUIET) == []
    assert measure.spikes({**QUIET, 2: 30.0 * 13.4}) == [2]  # dearer than 2 V(1) and than V(3)
    assert measure.spikes({**QUIET, 1: 60.0}) == [1]  # the one-token pass dearer than V(2)
    assert measure.spikes({**QUIET, 5: 200.0}) == [5]  # the largest: dearer than 5 V(1) x SPIKE (187.5)
    assert measure.spikes({**QUIET, 5: 180.0}) == []  # within SPIKE of 5 V(1)
    assert measure.spikes({**QUIET, 3: 47.0 * 1.2}) == []  # within SPIKE of V(4)


def fake_pair():
    return SimpleNamespace(
        target="target", draft="draft", device="cpu", vocab_size=100, runtime="torch", draft_tokenizer=None
    )


def timings(monkeypatch, answers: list[dict[int, float]]):
    asked = []

    def target_pass_ms(model, device, vocab, sizes, **kw):
        asked.append(list(sizes))
        if kw.get("context") == measure.CHECK_CONTEXT:
            return {1: QUIET[1]}
        answer = answers.pop(0) if answers else QUIET
        return {n: answer[n] for n in sizes}

    monkeypatch.setattr(measure, "target_pass_ms", target_pass_ms)
    monkeypatch.setattr(measure, "drafted_token_ms", lambda *a, **kw: 4.0)
    monkeypatch.setattr(measure, "head_rows", lambda model: 100)
    return asked


def test_a_spike_is_timed_again_and_the_cheaper_timing_kept(monkeypatch):
    sizes = tuple(QUIET)
    asked = timings(monkeypatch, [{**QUIET, 2: 402.0}])
    model = measure.measure(fake_pair(), sizes)
    assert model.verify == QUIET
    assert asked[:2] == [list(sizes), [2]]


def test_a_spike_that_stays_is_timed_at_most_spike_retries_more_times(monkeypatch):
    sizes = tuple(QUIET)
    spiked = {**QUIET, 2: 402.0}
    asked = timings(monkeypatch, [spiked] * 10)
    model = measure.measure(fake_pair(), sizes)
    assert asked[: 1 + measure.SPIKE_RETRIES] == [list(sizes)] + [[2]] * measure.SPIKE_RETRIES
    assert asked[1 + measure.SPIKE_RETRIES :] == [[1]]  # then the check's short-context pass, no more
    assert model.verify[2] == 402.0  # kept as timed: a size that stays dear is the pass's own
