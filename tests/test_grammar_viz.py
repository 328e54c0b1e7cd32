"""What the page draws of an output format: forced tokens told apart by colour and by style, the
inspector's count of allowed tokens and p's mass kept at each position, a trace carrying it all."""

from __future__ import annotations

import json

import pytest

from specviz import engine, run_stats, viz
from specviz.choices import JSON_SCHEMA
from specviz.events import DraftToken, EmittedToken, PositionInfo, RoundEvent, Trace
from specviz.settings import GenerationSettings
from specviz.viz.inspector import grammar_note, round_story
from tiny_models import tiny_pair


def _round() -> RoundEvent:
    drafted = [
        DraftToken(id=1, text='{"', p=1.0, q=1.0, u=None, decision="accepted", forced=True),
        DraftToken(id=2, text="name", p=0.0, q=1.0, u=None, decision="rejected"),
    ]
    positions = [
        PositionInfo(top=[], overlap=1.0, top2_logit_gap=3.0, allowed=1, kept=0.42),
        PositionInfo(top=[], overlap=0.0, top2_logit_gap=1.0, allowed=14, kept=0.97),
    ]
    emitted = EmittedToken(id=3, text="city", p=1.0, kind="resampled")
    return RoundEvent(
        index=1,
        k=2,
        drafted=drafted,
        emitted=emitted,
        positions=positions,
        draft_ms=1.0,
        verify_ms=2.0,
        t_end_s=0.1,
        new_tokens=3,
    )


def test_a_forced_token_is_striped_italic_and_says_so_in_its_tooltip():
    html = viz.tokens_html([_round()])
    assert 'class="tok tok-accepted tok-forced"' in html and "forced by the output format" in html
    assert 'class="tok tok-rejected"' in html  # a drafted token is not marked forced
    assert "tok-forced" in viz.legend_html()


def test_the_inspector_says_what_the_grammar_allowed_and_what_p_kept():
    event = _round()
    assert grammar_note(event, 2, 151_936) == (
        " (the grammar allowed 14 of 151,936 tokens here; p kept 97% of its mass)"
    )
    assert "forced by the output format" in grammar_note(event, 1)
    story = " ".join(round_story(event, 151_936))
    assert "the grammar allowed 1 of 151,936 tokens here; p kept 42% of its mass" in story
    assert grammar_note(RoundEvent(**{**_round().__dict__, "positions": []}), 2) == ""


def test_a_constrained_trace_round_trips_with_its_forced_tokens_and_masks():
    pair = tiny_pair("close")
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    s = GenerationSettings(drafter="lookup", max_new_tokens=24, output_format=JSON_SCHEMA, output_spec=schema)
    trace = engine.run(pair, "hello", s)
    again = Trace.from_json(trace.to_json())
    assert again.settings["output_spec"] == schema and again.summary.format_check == trace.summary.format_check
    forced = [d for e in again.events for d in e.drafted if d.forced]
    assert forced and all(p.allowed for e in again.events for p in e.positions)
    assert again.meta["grammar"]["vocab_size"] == pair.vocab_size


def test_the_labs_draw_acceptance_by_position_with_and_without_the_format():
    from specviz.viz.acceptance_plots import grammar_positions_figure
    from specviz.workshop.labs.panels import grammar_views

    pair = tiny_pair("close")
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    base = dict(drafter="model", policy="fixed", k=4, max_new_tokens=24)
    constrained = engine.run(pair, "hello", GenerationSettings(**base, output_format=JSON_SCHEMA, output_spec=schema))
    free = engine.run(pair, "hello", GenerationSettings(**base))
    fig, words = grammar_views(constrained, free)
    names = [t.name for t in fig.data]
    assert names == ["with the output format", "free text"]
    assert list(fig.data[1].y) == pytest.approx(run_stats.acceptance_by_position(free.events))
    assert "forced tokens" in words and "Free text" in words
    assert grammar_positions_figure([], []).data == ()


def test_the_live_stats_count_forced_tokens_apart_as_the_summary_does():
    pair = tiny_pair("close")
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    s = GenerationSettings(
        drafter="model", k=4, policy="fixed", max_new_tokens=32, output_format=JSON_SCHEMA, output_spec=schema
    )
    trace = engine.run(pair, "hello", s)
    live = viz.live_stats(trace.events)
    summary = trace.summary
    assert (live.checked, live.accepted) == (summary.drafted, summary.accepted)
    assert (live.forced, live.forced_accepted) == (summary.forced, summary.forced_accepted) and live.forced > 0
    html = viz.stats_html(live, summary)
    assert "forced" in html and "grammar / token" in html and "of a one-token target pass" in html
