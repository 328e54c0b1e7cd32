"""The round inspector: the story names the right numbers and decisions; p vs q bars."""

import pytest
from viz_sample import HOSTILE_IMG, HOSTILE_SCRIPT, bonus_round, greedy_round, hostile_round, sampled_round

from specviz.events import RoundEvent
from specviz.viz import position_bars_figure, position_choices, round_narrative_html, round_story


def test_sampled_round_story_gives_each_judgement_with_its_numbers():
    story = round_story(sampled_round())
    assert story[0].startswith("Round 0: the draft proposed 4 tokens")
    assert '"def", " foo", "(", "x"' in story[0]
    pos1, pos2, pos3 = story[1:4]
    assert "p = 0.620" in pos1 and "q = 0.550" in pos1 and "p/q = 1.127 \u2265 1" in pos1 and "accepted" in pos1
    assert "u = 0.200 < p/q = 0.750" in pos2 and "accepted" in pos2
    assert pos3.startswith('Position 3: "("') and "p = 0.120" in pos3 and "q = 0.400" in pos3
    assert "u = 0.710 \u2265 p/q = 0.300" in pos3 and pos3.endswith("rejected.")
    outcome = story[4]
    assert 'replacement "["' in outcome and "residual norm(max(0, p \u2212 q))" in outcome and "p = 0.250" in outcome
    assert '("x") is discarded unchecked' in outcome
    assert (
        story[5]
        == "Result: 2 accepted drafts + 1 replacement = 3 new tokens from one target pass (plain decoding would need 3 passes)."
    )


def test_bonus_round_story():
    story = round_story(bonus_round())
    assert (
        'Both drafts were accepted, so the same target pass also gives a bonus token: "\\n", drawn from p at position 3'
        in story[3]
    )
    assert "2 accepted drafts + 1 bonus = 3 new tokens" in story[4]


def test_greedy_round_story_speaks_of_top_choices():
    story = round_story(greedy_round())
    assert "choosing greedily" in story[0]
    assert story[1] == 'Position 1: "    return" matches the target\'s top choice, so it is accepted.'
    assert story[2].startswith('Position 2: the target\'s top choice is " x", not " None"') and "rejected" in story[2]
    assert "near-tie" not in story[2]  # a logit gap of 0.8 is no near-tie
    near = greedy_round()
    near.positions[1].top2_logit_gap = 0.01
    assert "near-tie" in round_story(near)[2] and "0.01" in round_story(near)[2]


def test_story_of_a_stopped_round():
    event = sampled_round()
    event.drafted[2].decision = "accepted"
    event.drafted[3].decision = "accepted"
    event.emitted = None
    story = round_story(event)
    assert "stopped" in story[-2] and "4 accepted drafts = 4 new tokens" in story[-1]


def test_narrative_html_escapes_and_colours_decisions():
    html = round_narrative_html(hostile_round())
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert '<span class="sv-decision-rejected">rejected</span>' in html
    assert HOSTILE_SCRIPT in round_story(hostile_round())[1] and HOSTILE_IMG in round_story(hostile_round())[2]


def test_position_choices_cover_drafts_and_bonus():
    assert [v for _, v in position_choices(sampled_round())] == [1, 2, 3, 4]
    labels = dict((v, label) for label, v in position_choices(bonus_round()))
    assert labels[3] == '3: "\\n" (bonus)'


def test_position_bars_show_p_q_overlap_and_normalised_residual():
    fig = position_bars_figure(sampled_round(), 3)
    names = [t.name for t in fig.data]
    assert names == ["p (target)", "q (draft)", "min(p, q)", "residual (normalised)"]
    p, q, overlap, residual = (list(t.y) for t in fig.data)
    assert p == [0.25, 0.12, 0.10] and q == [0.05, 0.40, 0.02]
    assert overlap == [0.05, 0.12, 0.02]
    # residual max(0, p - q) / (1 - overlap), overlap = 0.52
    assert residual == pytest.approx([0.20 / 0.48, 0.0, 0.08 / 0.48])
    ticks = list(fig.layout.xaxis.ticktext) + list(fig.layout.xaxis2.ticktext or [])
    assert any("\u2605" in t and "[" in t for t in ticks)  # the replacement
    assert any("\u25b2" in t and "(" in t for t in ticks)  # the rejected draft


def test_position_bars_at_the_bonus_position_show_p_only():
    fig = position_bars_figure(bonus_round(), 3)
    assert [t.name for t in fig.data] == ["p (target)"]
    assert "bonus" in fig.layout.title.text


def test_position_bars_escape_token_labels_and_handle_missing_positions():
    fig = position_bars_figure(hostile_round(), 1)
    ticks = " ".join(fig.layout.xaxis.ticktext)
    assert "<script" not in ticks and "&lt;script&gt;" in ticks
    empty = position_bars_figure(sampled_round(), 9)
    assert len(empty.data) == 0 and "no numbers" in empty.layout.annotations[0].text


def test_long_draft_keeps_marked_tokens_beyond_top_n():
    event: RoundEvent = sampled_round()
    fig = position_bars_figure(event, 3, top_n=1)
    assert len(fig.data[0].x) == 2  # "[" (top p, also emitted) and the drafted "(" kept


def test_a_draft_free_rounds_story_never_calls_its_proposer_the_draft():
    from specviz.engine.generation import run
    from specviz.settings import GenerationSettings
    from tiny_models import tiny_pair

    prompt = "a b c d a b c d a b c d a b c d"
    trace = run(
        tiny_pair("close"),
        prompt,
        GenerationSettings(drafter="suffix", policy="fixed", k=4, temperature=0.9, max_new_tokens=40, seed=3),
    )
    told = [
        " ".join(round_story(e))
        for e in trace.events
        if isinstance(e, RoundEvent) and e.source is not None and e.drafted
    ]
    assert told, "the suffix drafter proposed in some round"
    assert all("draft" not in t.replace("drafted", "") for t in told), told[0]


def test_a_tree_rounds_tokens_are_told_as_point_mass_checks_not_p_over_q():
    # A tree's tokens were chosen, not sampled: the rule checked u against what is left of p
    # at the node, so a p/q comparison would explain a check that never happened.
    from dataclasses import replace

    from specviz.events import TreeNode
    from specviz.viz.tokens import draft_tooltip

    chain = sampled_round()
    nodes = [
        TreeNode(parent=i - 1, token=d.id, text=d.text, depth=i + 1, q=d.q, p=d.p, decision=d.decision)
        for i, d in enumerate(chain.drafted)
    ]
    tree = replace(chain, tree=nodes)
    story = round_story(tree)
    assert "checked as a point mass" in story[2] and "p/q" not in story[2] and story[2].endswith("accepted.")
    assert "checked as a point mass" in story[3] and story[3].endswith("rejected.")
    tip = draft_tooltip(tree.drafted[2], tree, 3, greedy=False)
    assert "rejected: u \u2265 p'" in tip and "u \u2265 p/q" not in tip
    assert "rejected: u \u2265 p/q" in draft_tooltip(chain.drafted[2], chain, 3, greedy=False)
