"""A round's token tree, its attention mask, a cross-tokenizer round's alignment, and whether a
tree pays: drawn from RoundEvents alone, from hand-built rounds and from tiny-model runs."""

from __future__ import annotations

import pytest
import torch
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

from specviz.engine import run
from specviz.events import AlignedToken, DraftToken, EmittedToken, RoundEvent, Trace, TreeNode
from specviz.lm.tree import ancestry
from specviz.settings import GenerationSettings
from specviz.viz.palette import ACCEPTED, BONUS, NEUTRAL, REJECTED, RESAMPLED
from specviz.viz.tree import (
    accepted_path,
    alignment_groups,
    alignment_html,
    tree_figure,
    tree_layout,
    tree_mask,
    tree_mask_figure,
)
from specviz.viz.tree_payoff import chain_expected, measured_rates, payoff_sentences, tree_payoff

pytestmark = pytest.mark.usefixtures("single_thread")

HOSTILE = '<img src=x onerror="alert(1)">'
TREE = GenerationSettings(drafter="tree", tree_nodes=8, tree_width=2, policy="fixed", k=8, max_new_tokens=40)


@pytest.fixture(scope="module")
def tree_trace() -> Trace:
    return run(tiny_pair("close"), "for i in range(10):", TREE)


def rounds_of(trace: Trace) -> list[RoundEvent]:
    return [e for e in trace.events if isinstance(e, RoundEvent)]


def node(parent: int, text: str, depth: int, decision: str, p: float | None = None, q: float = 1.0) -> TreeNode:
    return TreeNode(parent=parent, token=100 + len(text), text=text, depth=depth, q=q, p=p, decision=decision)


def hand_round(draft_ms: float = 5.0, nodes: list[TreeNode] | None = None) -> RoundEvent:
    """root -> a (accepted) -> c (rejected); root -> b (unchecked); then "x" is emitted."""
    nodes = nodes or [
        node(-1, "a", 1, "accepted", 0.9, 0.7),
        node(-1, "b", 1, "unchecked", None, 0.2),
        node(0, "c", 2, "rejected", 0.1, 0.6),
    ]
    return RoundEvent(
        index=3,
        k=2,
        drafted=[DraftToken(1, "a", 0.9, 0.7, 0.5, "accepted"), DraftToken(2, "c", 0.1, 0.6, 0.8, "rejected")],
        emitted=EmittedToken(id=7, text="x", p=0.4, kind="resampled"),
        positions=[],
        draft_ms=draft_ms,
        verify_ms=1.0,
        t_end_s=0.1,
        new_tokens=2,
        tree=nodes,
    )


# --- the mask --------------------------------------------------------------------------------


def test_the_mask_lets_each_node_see_itself_and_its_ancestors_only():
    # root; 0 and 1 under the root; 2 under 0; 3 under 2.
    assert tree_mask([-1, -1, 0, 2]) == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 0, 1, 0, 0],
        [1, 1, 0, 1, 0],
        [1, 1, 0, 1, 1],
    ]
    with pytest.raises(ValueError, match="earlier node"):
        tree_mask([-1, 2, 0])


def test_the_mask_is_the_one_the_target_pass_uses(tree_trace):
    # The target's pass feeds the root as node 0 and node i as i + 1 (specviz/engine/tree_round.py).
    for r in rounds_of(tree_trace):
        parents = [t.parent for t in r.tree]
        expected = ancestry([-1] + [p + 1 for p in parents]).to(torch.int).tolist()
        assert tree_mask(parents) == expected


def test_the_mask_figure_draws_the_mask_with_the_root_first():
    fig = tree_mask_figure(hand_round())
    heat = fig.data[0]
    assert [list(row) for row in heat.z] == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert list(fig.layout.yaxis.ticktext) == ["root", "0 a", "1 b", "2 c"]
    assert heat.customdata[3][1] == 'node 2 "c" may look at node 0 "a"'
    assert heat.customdata[3][2] == 'node 2 "c" may not look at node 1 "b"'


# --- the tree --------------------------------------------------------------------------------


def test_layout_puts_each_parent_level_with_its_first_child():
    depth, slot = tree_layout([-1, -1, 0, 0, 1])  # root: 0 (2, 3), 1 (4)
    assert depth == {-1: 0, 0: 1, 1: 1, 2: 2, 3: 2, 4: 2}
    assert slot == {2: 0, 3: 1, 0: 0, 4: 2, 1: 2, -1: 0}
    depth, slot = tree_layout([-1, -1, 0], extra_leaf_under=0)  # the emitted token under node 0
    assert depth[3] == 2 and slot[3] == 1 and slot[1] == 2


def test_the_tree_figure_colours_nodes_rings_the_targets_choices_and_shows_the_emitted_token():
    fig = tree_figure(hand_round())
    by_name = {t.name: t for t in fig.data if t.name}
    assert list(by_name["accepted path"].text) == ["a"] and by_name["accepted path"].marker.color == ACCEPTED
    assert list(by_name["rejected"].text) == ["c"] and by_name["rejected"].marker.color == REJECTED
    assert list(by_name["unchecked"].text) == ["b"] and by_name["unchecked"].marker.color == NEUTRAL
    emitted = by_name["emitted (replacement)"]
    assert list(emitted.text) == ["x"] and emitted.marker.color == RESAMPLED and (emitted.x[0], emitted.y[0]) == (2, 1)
    # The target chose "a" at depth 1 and "x" at depth 2.
    ring = by_name["the target's choice"]
    assert list(zip(ring.x, ring.y)) == [(1, 0), (2, 1)]
    hover = by_name["rejected"].customdata[0]
    assert "q = 0.600" in hover and "p = 0.100" in hover and "depth 2" in hover
    assert "not checked" in by_name["unchecked"].customdata[0]
    assert "Round 3: 3 drafted nodes, 1 accepted" in fig.layout.title.text


def test_a_bonus_is_drawn_blue_after_a_fully_accepted_path():
    r = hand_round(nodes=[node(-1, "a", 1, "accepted", 0.9), node(0, "b", 2, "accepted", 0.8)])
    r.emitted = EmittedToken(id=9, text="z", p=0.5, kind="bonus")
    by_name = {t.name: t for t in tree_figure(r).data if t.name}
    assert by_name["emitted (bonus)"].marker.color == BONUS and by_name["emitted (bonus)"].x[0] == 3


def test_a_real_tree_reads_as_the_rounds_new_tokens(tree_trace):
    rounds = rounds_of(tree_trace)
    assert any(len({t.parent for t in r.tree}) < len(r.tree) for r in rounds), "some round branches"
    for r in (r for r in rounds if r.tree):  # a round at the token limit may draft nothing
        path = accepted_path(r)
        tokens = [r.tree[i].token for i in path] + ([r.emitted.id] if r.emitted else [])
        # The drafted chain starts with the accepted path, so the tree, drawn, shows the new tokens.
        assert tokens == [d.id for d in r.drafted[: r.accepted]] + ([r.emitted.id] if r.emitted else [])
        fig = tree_figure(r)
        drawn = sum(len(t.x) for t in fig.data if t.name in ("accepted path", "rejected", "unchecked"))
        assert drawn == len(r.tree)
        rings = [len(t.x) for t in fig.data if t.name == "the target's choice"]
        assert sum(rings) == len(path) + (r.emitted is not None), (r.index, path, r.emitted)


def test_a_replayed_trace_draws_the_same_tree_and_mask(tree_trace):
    replayed = Trace.from_json(tree_trace.to_json())
    for live, again in zip(rounds_of(tree_trace), rounds_of(replayed)):
        assert tree_figure(live).to_json() == tree_figure(again).to_json()
        assert tree_mask_figure(live).to_json() == tree_mask_figure(again).to_json()


def test_a_chain_round_says_it_has_no_tree():
    r = hand_round()
    r.tree = []
    assert "chain" in tree_figure(r).layout.annotations[0].text
    assert "chain" in tree_mask_figure(r).layout.annotations[0].text


def test_tree_text_is_escaped():
    r = hand_round(nodes=[node(-1, HOSTILE, 1, "accepted", 0.9), node(0, "b", 2, "rejected", 0.1)])
    r.emitted.text = HOSTILE
    fig = tree_figure(r)
    everything = fig.to_json() + fig.layout.title.text
    assert "<img" not in everything.replace("\\u003c", "<").replace("\\u003e", ">") and "&lt;img" in everything
    assert "<img" not in tree_mask_figure(r).to_json().replace("\\u003c", "<")


# --- the alignment ---------------------------------------------------------------------------


def cross_round(alignment: list[AlignedToken], drafted: list[tuple[str, str]]) -> RoundEvent:
    return RoundEvent(
        index=1,
        k=len(drafted),
        drafted=[DraftToken(i, text, 0.5, 1.0, None, d) for i, (text, d) in enumerate(drafted)],
        emitted=EmittedToken(id=50, text="!", p=0.3, kind="resampled"),
        positions=[],
        draft_ms=1,
        verify_ms=1,
        t_end_s=0.1,
        new_tokens=3,
        alignment=alignment,
    )


def test_alignment_groups_draft_tokens_that_share_a_target_token():
    r = cross_round(
        # "he" + "llo" both feed target "hello"; " wor" became " w" + "or"; "ld" is still incomplete.
        [
            AlignedToken(1, "he", [0]),
            AlignedToken(2, "llo", [0, 1]),
            AlignedToken(3, " wor", [2, 3]),
            AlignedToken(4, "ld", []),
        ],
        [("hello", "accepted"), (",", "accepted"), (" w", "rejected"), ("or", "unchecked")],
    )
    assert alignment_groups(r) == [([0, 1], [0, 1]), ([2], [2, 3]), ([3], [])]
    html = alignment_html(r, {"drafter": "model-text", "vocab": {"overlap": 0.623}})
    assert html.count('class="tok tok-accepted"') == 2 and html.count('class="tok tok-rejected"') == 1
    assert html.count('class="tok tok-unchecked"') == 1 and html.count('class="tok tok-resampled"') == 1
    assert html.count("sv-align-draft-tok") == 4
    assert "2 accepted, 1 rejected, 1 unchecked" in html and "through text" in html and "62.3%" in html
    # A target token no draft token names still shows, in its place.
    r.alignment = [AlignedToken(1, "hello", [0]), AlignedToken(3, " wor", [2, 3])]
    assert alignment_groups(r) == [([0], [0]), ([], [1]), ([1], [2, 3])]


def test_alignment_text_is_escaped():
    r = cross_round([AlignedToken(1, HOSTILE, [0])], [(HOSTILE, "accepted")])
    html = alignment_html(r)
    assert "<img" not in html and html.count("&lt;img") == 4  # each token as text and in its tooltip


def test_a_real_cross_tokenizer_round_shows_every_candidate_once():
    from test_cross_vocab import cross_pair

    pair = cross_pair()
    trace = run(
        pair,
        "The quick brown fox",
        GenerationSettings(vocab_method="text", k=4, policy="fixed", max_new_tokens=16, temperature=0.0),
    )
    rounds = [r for r in rounds_of(trace) if r.alignment]
    assert rounds
    # the pair's cost model was measured with the draft's own (smaller) vocabulary, and the
    # trace says how the pair drafts
    assert trace.meta["cost_model"]["draft"] > 0 and trace.meta["vocab"]["method"] in ("text", "intersection")
    assert any(len(a.candidates) > 1 for r in rounds for a in r.alignment), "some draft token became two target tokens"
    for r in rounds:
        html = alignment_html(r, trace.meta)
        assert html.count("data-pos=") == len(r.drafted)
        assert html.count("sv-align-draft-tok") == len(r.alignment)
        assert "through text" in html


# --- does a tree pay ----------------------------------------------------------------------------


def payoff_rounds() -> list[RoundEvent]:
    """Rank 1 is checked 5 times and accepted 3 (a1 = 0.6); rank 2 once, accepted (a2 = 1)."""
    sampled_a = [node(-1, "a", 1, "accepted"), node(-1, "b", 1, "unchecked"), node(0, "c", 2, "rejected")]
    sampled_b = [node(-1, "a", 1, "rejected"), node(-1, "b", 1, "accepted"), node(0, "c", 2, "unchecked")]
    # Greedy marks a later sibling rejected after an accepted one; it was not needed, so it does not count.
    greedy = [node(-1, "a", 1, "accepted"), node(-1, "b", 1, "rejected"), node(0, "c", 2, "accepted")]
    return [hand_round(5.0, n) for n in (sampled_a, sampled_b, greedy)]


def test_rates_count_a_sibling_only_when_the_ones_before_it_were_rejected():
    rates = measured_rates(payoff_rounds())
    assert rates.by_rank == {1: (3, 5), 2: (1, 1)}
    assert rates.by_depth_rank == {(1, 1): (2, 3), (1, 2): (1, 1), (2, 1): (1, 2)}
    # Cells under 5 checks borrow their rank's rate: 0.6 + 0.6^2 + 0.6^3 for a chain of 3.
    assert chain_expected(3, rates) == pytest.approx(1.176)


def test_a_tree_that_costs_more_than_it_gains_is_said_not_to_pay():
    meta = {"cost_model": {"verify": {"1": 10.0, "2": 12.0, "4": 16.0}, "draft": 2.0}}
    pay = tree_payoff(payoff_rounds(), {"tree_nodes": 3}, meta)
    # Each tree [-1, -1, 0]: 0.6 + 0.4 * 1.0 + 0.6 * 0.6 = 1.36 expected accepted.
    assert pay.tree_expected == pytest.approx(1.36) and pay.chain_expected == pytest.approx(1.176)
    assert pay.measured_accepted == pytest.approx(4 / 3)
    assert pay.tree_verify_ms == 16.0 and pay.tree_draft_ms == 5.0
    assert pay.tree_speedup == pytest.approx(2.36 * 10 / 21)
    # Chains: k = 1 costs 2 + V(2) = 14 ms for 1.6 tokens; k = 2 costs 4 + V(3) = 18 ms (V(3) interpolated).
    assert pay.chain[0] == pytest.approx((1, 0.6, 12.0, 16 / 14)) and pay.chain[1][2] == pytest.approx(14.0)
    assert pay.best_chain[0] == 1 and not pay.pays
    assert "the tree does not pay" in payoff_sentences(pay)[-1] and "chain of 1" in payoff_sentences(pay)[-1]
    # Dearer chain tokens (D = 10 ms) make the same tree the better choice.
    pay = tree_payoff(
        payoff_rounds(), {"tree_nodes": 3}, {"cost_model": {"verify": {"1": 10.0, "2": 12.0, "4": 16.0}, "draft": 10.0}}
    )
    assert pay.pays and "the tree pays" in payoff_sentences(pay)[-1]


def test_no_payoff_without_trees_or_costs(tree_trace):
    chain = hand_round()
    chain.tree = []
    assert tree_payoff([chain], {"tree_nodes": 3}, {"cost_model": {"verify": {"1": 1.0}}}) is None
    assert tree_payoff(rounds_of(tree_trace), tree_trace.settings, {}) is None
    pay = tree_payoff(tree_trace.events, tree_trace.settings, tree_trace.meta)
    assert pay is not None and pay.nodes == 8 and len(pay.chain) == 8
