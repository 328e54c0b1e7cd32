"""The viz layer on traces the real engine recorded (tiny random models, so the text is
gibberish full of split bytes and control characters: a good stress test for escaping).
Re-record with `python tests/data/record_viz_traces.py`."""

import re
from pathlib import Path

import pytest

from specviz.events import RoundEvent, Trace
from specviz.viz import acceptance_plots as ap
from specviz.viz import (
    identity_check,
    live_stats,
    position_bars_figure,
    position_choices,
    predict,
    prediction_html,
    race_end_s,
    race_frame,
    round_narrative_html,
    round_story,
    round_timeline_figure,
    tokens_html,
)

DATA = Path(__file__).resolve().parent / "data"


def load(name: str) -> Trace:
    return Trace.from_json((DATA / f"viz_trace_{name}.json").read_text())


@pytest.fixture(scope="module", params=["sampled", "greedy"])
def spec(request) -> Trace:
    return load(request.param)


def test_live_stats_agree_with_the_engines_summary(spec):
    s, summary = live_stats(spec.events), spec.summary
    assert s.tokens == summary.new_tokens and s.rounds == summary.rounds and s.checked == summary.drafted
    assert s.acceptance == pytest.approx(summary.acceptance_rate)
    assert s.mean_overlap == pytest.approx(summary.mean_overlap)
    assert s.tokens_per_round == pytest.approx(summary.tokens_per_round)


def test_every_token_is_drawn_once_with_the_class_of_its_decision(spec):
    html = tokens_html(spec.events)
    rounds = [e for e in spec.events if isinstance(e, RoundEvent)]
    expected = []
    for r in rounds:
        expected += [
            {"accepted": "tok-accepted", "rejected": "tok-rejected", "unchecked": "tok-rejected tok-unchecked"}[
                d.decision
            ]
            for d in r.drafted
        ]
        if r.emitted is not None:
            expected.append(f"tok-{r.emitted.kind}")
    assert re.findall(r'class="tok ([^"]+)"', html) == expected
    # no raw control character survives (newlines are kept: the stream is white-space: pre-wrap)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", html)
    html.encode("utf-8")  # no lone surrogate either


def test_every_round_tells_its_story_and_draws_each_position(spec):
    rounds = [e for e in spec.events if isinstance(e, RoundEvent)]
    for r in rounds:
        story = round_story(r)
        assert story[0].startswith(f"Round {r.index}:") and story[-1].startswith("Result:")
        judged = [d for d in r.drafted if d.decision != "unchecked"]
        assert len(story) == 3 + len(judged)
        narrative = round_narrative_html(r)
        assert set(re.findall(r"<([a-z]+)", narrative)) <= {"div", "p", "ul", "li", "code", "span"}
        assert not re.search(r"[\x00-\x1f\x7f]", narrative)
        for _, pos in position_choices(r):
            fig = position_bars_figure(r, pos)
            assert fig.data and all(len(t.y) > 0 for t in fig.data)


def test_identity_check_matches_the_recorded_greedy_run_to_plain_and_finds_a_changed_token():
    """The identity check on frozen recordings: it reads the same 40 output tokens from the greedy
    speculative rounds as from the plain tokens, and finds where they part: at a changed token,
    or where a shorter run ends.
    (That the engine's greedy speculative output equals plain greedy is checked on live runs in
    test_engine.py and test_engine_bundled.py.)"""
    greedy, plain = load("greedy"), load("plain")
    ident = identity_check(greedy, plain)
    assert ident.identical and ident.first_difference is None and ident.compared == 40
    assert [e.id for e in plain.events] == plain.token_ids == greedy.token_ids

    changed = load("plain")
    changed.events[17].id += 1
    ident = identity_check(greedy, changed)
    assert not ident.identical and ident.first_difference == 17 and ident.compared == 40

    cut = load("plain")
    cut.events = cut.events[:30]
    ident = identity_check(greedy, cut)
    assert not ident.identical and ident.first_difference == 30 and ident.compared == 30


def test_race_and_figures_on_recorded_runs(spec):
    plain = load("plain")
    s0, p0 = race_frame(spec, plain, 0.0)
    assert 'class="tok ' not in s0 + p0
    s1, p1 = race_frame(spec, plain, race_end_s(spec, plain))
    assert f"done: {spec.summary.new_tokens} tokens" in s1 and p1.count("tok-plain") == 40
    for fig in (
        round_timeline_figure(spec.events),
        ap.position_rates_figure(spec.events),
        ap.lengths_figure(spec.events),
    ):
        assert fig.data
    pred = predict(spec.summary, spec.events, k=spec.settings["k"], plain=plain.summary)
    assert pred.alpha == pytest.approx(spec.summary.mean_overlap)
    assert "predicted" in prediction_html(pred)
