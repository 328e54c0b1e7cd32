"""Where a draft-free round's candidates came from (viz.source), hindsight for tree rounds,
drawn from real runs of the suffix and lookahead drafters on a tiny model."""

import re

import pytest

from specviz import engine, run_stats
from specviz.events import CandidateSource, DraftToken, EmittedToken, RoundEvent, TreeNode
from specviz.settings import GenerationSettings
from specviz.viz.source import source_html
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPT = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add("


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(None)


def tree_rounds(trace):
    return [e for e in trace.events if e.type == "round" and e.tree and e.source is not None]


def test_a_suffix_round_lists_every_node_with_its_count_and_marks_the_path(pair):
    trace = engine.run(
        pair, PROMPT, GenerationSettings(drafter="suffix", policy="fixed", k=8, max_new_tokens=32, raw=True)
    )
    event = tree_rounds(trace)[0]
    html = source_html(event)
    nodes = re.findall(r'<li data-node="(\d+)" data-decision="(\w+)">', html)
    assert [int(i) for i, _ in nodes] == list(range(len(event.tree)))
    assert [d for _, d in nodes] == [n.decision for n in event.tree]
    for count in event.source.counts:
        assert f"{count} of {event.source.occurrences}" in html
    assert f"occurred {event.source.occurrences} time" in html


def test_a_lookahead_round_draws_its_window_level_by_column(pair):
    trace = engine.run(
        pair,
        PROMPT,
        GenerationSettings(
            drafter="lookahead", policy="fixed", k=4, max_new_tokens=16, raw=True, lookahead_window=5, lookahead_ngram=4
        ),
    )
    event = next(e for e in trace.events if e.type == "round" and e.source is not None and e.source.window_on)
    html = source_html(event)
    assert html.count('<th scope="row">') == 3  # N - 1 levels
    assert html.count('<th scope="col">') == 5  # W columns
    assert html.count("<li>") >= 5  # an n-gram per column
    assert event.source.ride == 5 * 3 - 1


def test_hostile_token_text_is_escaped():
    src = CandidateSource(method="suffix", matched=["<script>"], occurrences=1, counts=[1])
    event = RoundEvent(
        index=3,
        k=1,
        drafted=[DraftToken(id=1, text="<b>", p=1.0, q=1.0, u=None, decision="accepted")],
        emitted=EmittedToken(id=2, text="x", p=1.0, kind="bonus"),
        positions=[],
        draft_ms=0.1,
        verify_ms=5.0,
        t_end_s=1.0,
        new_tokens=5,
        tree=[TreeNode(parent=-1, token=1, text="<b>", depth=1, q=1.0, p=1.0, decision="accepted")],
        source=src,
    )
    html = source_html(event)
    assert "<script>" not in html and "<b>" not in html


def test_hindsight_of_a_tree_round_is_its_best_node_budget():
    # Five nodes, the path 0 -> 2 accepted; a flat pass cost: a budget of 3 (nodes 0..2) keeps
    # the whole path, and a larger one pays more for nothing.
    tree = [
        TreeNode(parent=p, token=t, text=str(t), depth=d, q=1.0, p=1.0, decision=dec)
        for p, t, d, dec in [
            (-1, 1, 1, "accepted"),
            (-1, 2, 1, "unchecked"),
            (0, 3, 2, "accepted"),
            (2, 4, 3, "rejected"),
            (0, 5, 2, "unchecked"),
        ]
    ]
    event = RoundEvent(
        index=1,
        k=3,
        drafted=[],
        emitted=EmittedToken(id=9, text="z", p=1.0, kind="resampled"),
        positions=[],
        draft_ms=0.0,
        verify_ms=10.0,
        t_end_s=1.0,
        new_tokens=3,
        tree=tree,
        source=CandidateSource(method="suffix", counts=[3, 1, 3, 1, 1], occurrences=4),
    )
    cost = {"verify": {"1": 100.0, "3": 110.0, "4": 130.0, "6": 200.0}, "draft": 0.0}
    h = run_stats.hindsight([event], cost)
    assert h.rounds[0].best_k == 3  # 3 tokens for V(4) = 130 beats 2 for V(2) (105) and 1 for V(1)
    assert h.rounds[0].drafted == 5
    # The policy's round is priced as a pass over the root and all five nodes.
    assert h.policy_ms == pytest.approx(200.0)


def test_a_run_that_stood_aside_says_why_in_the_runtimes_pass_costs(pair):
    from dataclasses import replace

    from specviz.viz.speculation_note import speculation_note_html

    trace = engine.run(pair, PROMPT, GenerationSettings(drafter="suffix", max_new_tokens=24, raw=True))
    steep = {"verify": {"1": 70.0, "2": 130.0, "4": 190.0, "8": 370.0}, "draft": 0.0}
    rounds = [e for e in trace.events if e.type == "round"][1:]
    used = sum(bool(e.drafted) for e in rounds)
    slow = replace(
        trace, meta={**trace.meta, "cost_model": steep}, summary=replace(trace.summary, speedup_vs_plain=0.8)
    )
    note = speculation_note_html(slow)
    assert f'data-speculated="{used}" data-rounds="{len(rounds)}"' in note
    assert "1.86 one-token passes (130 against 70 ms)" in note and "a pass over 8 costs 5.29" in note
    assert "0.80\u00d7 plain decoding (below plain)" in note
    # Faster than plain and speculating in every round: nothing to explain.
    every = [
        replace(e, drafted=e.drafted or [DraftToken(id=1, text="x", p=1.0, q=1.0, u=None, decision="accepted")])
        for e in trace.events
    ]
    fast = replace(trace, events=every, summary=replace(trace.summary, speedup_vs_plain=1.4))
    assert speculation_note_html(fast) == ""
    # While the run streams it says nothing yet.
    assert speculation_note_html(replace(slow, summary=replace(slow.summary, stop_reason=""))) == ""


def test_a_run_on_a_busier_machine_than_at_load_says_so(pair):
    """The note compares the run's measured target passes with the load-time costs of the
    same passes: with V(n) flat at 50 ms, rounds that each took 100 ms ran 2.0x slower."""
    from dataclasses import replace

    from specviz.viz.speculation_note import speculation_note_html

    trace = engine.run(pair, PROMPT, GenerationSettings(drafter="suffix", max_new_tokens=24, raw=True))
    flat = {"verify": {"1": 50.0, "17": 50.0}, "draft": 0.0}

    def taking(ms: float):
        events = [replace(e, verify_ms=ms) if e.type == "round" else e for e in trace.events]
        return replace(
            trace,
            events=events,
            meta={**trace.meta, "cost_model": flat},
            summary=replace(trace.summary, speedup_vs_plain=0.8),
        )

    busy = speculation_note_html(taking(100.0))
    assert 'data-slowdown="2.00"' in busy and "took 2.0\u00d7 what the same passes cost when the pair loaded" in busy
    quiet = speculation_note_html(taking(50.0))
    assert 'data-slowdown="1.00"' in quiet and "busier" not in quiet


def test_a_suffix_runs_note_tells_a_round_in_the_inspectors_words(pair):
    from dataclasses import replace

    from specviz.viz.speculation_note import speculation_note_html

    trace = engine.run(pair, PROMPT, GenerationSettings(drafter="suffix", max_new_tokens=24, raw=True))
    sized = [e for e in trace.events if e.type == "round" and e.source is not None and e.source.note]
    assert sized  # the cost-aware suffix run sized its rounds and said how
    slow = replace(trace, summary=replace(trace.summary, speedup_vs_plain=0.8))
    note = speculation_note_html(slow)
    shown = next(e for e in reversed(sized) if e.drafted) if any(e.drafted for e in sized) else sized[-1]
    # The inspector's sentence on the same round, word for word.
    assert f"Round {shown.index}, as the Round inspector tells it" in note
    assert shown.source.note.split(":")[0] in note and shown.source.note.split(":")[0] in source_html(shown)
    assert "Priced on the measured pass costs V(n)" in note
