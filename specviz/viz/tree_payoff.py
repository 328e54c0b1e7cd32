"""Does a token tree pay on this machine? A tree run's measured acceptance, by depth and by
sibling rank, turned into the expected accepted length of its N-node trees against an
N-token chain, and each priced with the trace's measured verify cost V(n).

The model: a node is accepted with the measured rate for its (depth, sibling rank), given
that its parent was accepted and its earlier siblings were rejected (siblings are listed
best first, and the target checks them in that order), independently of everything else.
A (depth, rank) seen fewer than MIN_CHECKED times uses its rank's rate over all depths.
Then a node is on the accepted path with probability
    P(parent on path) * prod over earlier siblings (1 - a) * a(depth, rank),
the tree's expected accepted length is the sum of that over its nodes, and a chain of k is
the tree whose nodes are all first children: sum over d <= k of prod over j <= d a(j, 1).

A round costs its drafting plus one verify pass: V(N + 1) for a tree of N nodes (the root
and every node, under the tree mask) and k * D + V(k + 1) for a chain of k, with D and V from
the trace's cost model; the tree's drafting is its rounds' measured draft time. A speedup is
tokens per round (accepted + 1) times V(1) over that cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from specviz.cost_model import recorded
from specviz.events import Event, RoundEvent
from specviz.viz.palette import ACCEPTED, DRAFT, PLAIN_LINE, style_figure, whole_dtick
from specviz.viz.text import paragraphs_html

MIN_CHECKED = 5  # a (depth, rank) checked fewer times than this borrows its rank's rate


@dataclass
class Rates:
    """Measured acceptance: accepted / checked, by sibling rank (1 = the draft's first choice)
    and by (depth, rank), counting only nodes whose earlier siblings were all rejected."""

    by_rank: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (accepted, checked)
    by_depth_rank: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def rate(self, depth: int, rank: int) -> float:
        acc, seen = self.by_depth_rank.get((depth, rank), (0, 0))
        if seen >= MIN_CHECKED:
            return acc / seen
        acc, seen = self.by_rank.get(rank, (0, 0))
        return acc / seen if seen else 0.0


def sibling_ranks(parents: list[int]) -> list[int]:
    """Each node's 1-based position among its parent's children, in listed order."""
    count: dict[int, int] = {}
    out = []
    for p in parents:
        count[p] = count.get(p, 0) + 1
        out.append(count[p])
    return out


def measured_rates(rounds: Iterable[RoundEvent]) -> Rates:
    rates = Rates()
    for r in rounds:
        parents = [t.parent for t in r.tree]
        ranks = sibling_ranks(parents)
        taken: set[int] = set()  # parents one of whose children was accepted already
        for i, t in enumerate(r.tree):
            if t.decision == "unchecked" or t.parent in taken:
                continue  # never checked, or checked after a sibling had been accepted (greedy marks it rejected)
            ok = t.decision == "accepted"
            if ok:
                taken.add(t.parent)
            for table, key in ((rates.by_rank, ranks[i]), (rates.by_depth_rank, (t.depth, ranks[i]))):
                a, s = table.get(key, (0, 0))
                table[key] = (a + ok, s + 1)
    return rates


def expected_accepted(parents: list[int], depths: list[int], rates: Rates) -> float:
    """The expected accepted length of one tree under the model (see the module's words)."""
    ranks = sibling_ranks(parents)
    on_path: list[float] = []
    rejected_before: dict[int, float] = {}  # parent -> P(every child listed so far was rejected)
    for i, p in enumerate(parents):
        a = rates.rate(depths[i], ranks[i])
        reach = (1.0 if p < 0 else on_path[p]) * rejected_before.get(p, 1.0)
        on_path.append(reach * a)
        rejected_before[p] = rejected_before.get(p, 1.0) * (1 - a)
    return float(sum(on_path))


def chain_expected(k: int, rates: Rates) -> float:
    return expected_accepted(list(range(-1, k - 1)), list(range(1, k + 1)), rates)


@dataclass
class TreePayoff:
    nodes: int  # N: the run's node budget
    rounds: int
    rates: Rates
    tree_expected: float  # mean over the run's trees of their expected accepted length (the model)
    measured_accepted: float  # what the run's tree rounds accepted, on average
    chain_expected: float  # an N-token chain under the same rates
    v1: float  # V(1): one one-token target pass
    tree_verify_ms: float  # V(N + 1)
    tree_draft_ms: float  # the run's mean draft time per tree round
    draft_ms: float  # D: one drafted token of a chain
    max_measured: int  # the largest pass size the cost model measured
    chain: list[tuple[int, float, float, float]]  # per chain k = 1..N: (k, expected accepted, V(k + 1), speedup)

    @property
    def tree_speedup(self) -> float:
        return (self.tree_expected + 1) * self.v1 / (self.tree_draft_ms + self.tree_verify_ms)

    @property
    def best_chain(self) -> tuple[int, float, float, float]:
        return max(self.chain, key=lambda c: c[3])

    @property
    def pays(self) -> bool:
        return self.tree_speedup > self.best_chain[3] and self.tree_speedup > 1.0


def tree_payoff(events: Iterable[Event], settings: Mapping[str, Any], meta: Mapping[str, Any]) -> TreePayoff | None:
    """The numbers above for a tree run, or None (no tree rounds, or no cost model)."""
    rounds = [e for e in events if isinstance(e, RoundEvent) and e.tree]
    cost = recorded(meta)
    if not rounds or cost is None:
        return None
    nodes = int(settings.get("tree_nodes") or max(len(r.tree) for r in rounds))
    rates = measured_rates(rounds)
    tree = float(
        np.mean([expected_accepted([t.parent for t in r.tree], [t.depth for t in r.tree], rates) for r in rounds])
    )
    measured = float(np.mean([sum(t.decision == "accepted" for t in r.tree) for r in rounds]))
    chain = []
    for k in range(1, nodes + 1):
        e = chain_expected(k, rates)
        chain.append((k, e, cost.verify_ms(k + 1), (e + 1) * cost.target / cost.round_ms(k)))
    return TreePayoff(
        nodes=nodes,
        rounds=len(rounds),
        rates=rates,
        tree_expected=tree,
        measured_accepted=measured,
        chain_expected=chain[-1][1],
        v1=cost.target,
        tree_verify_ms=cost.verify_ms(nodes + 1),
        tree_draft_ms=float(np.mean([r.draft_ms for r in rounds])),
        draft_ms=cost.draft,
        max_measured=max(cost.verify),
        chain=chain,
    )


def payoff_sentences(pay: TreePayoff) -> list[str]:
    """In words: what the tree and the chain are expected to accept, what each costs, and
    whether the tree pays here."""
    k, ek, vk, sk = pay.best_chain
    n = pay.nodes
    out = [
        f"A tree of {n} nodes, as this run drafted them, is expected to accept {pay.tree_expected:.2f} tokens per round "
        f"(the run accepted {pay.measured_accepted:.2f}); a chain of {n} tokens, {pay.chain_expected:.2f}.",
        f"Verifying the tree is one pass over {n + 1} tokens: V({n + 1}) = {pay.tree_verify_ms:.1f} ms, "
        f"{pay.tree_verify_ms / pay.v1:.2f}\u00d7 a one-token pass ({pay.v1:.1f} ms); the best chain, k = {k}, "
        f"verifies {k + 1}: V({k + 1}) = {vk:.1f} ms."
        + (
            f" (Passes over more than {pay.max_measured} tokens were not measured: their cost is extended along "
            "the last two sizes measured.)"
            if n + 1 > pay.max_measured
            else ""
        ),
        f"With drafting ({pay.tree_draft_ms:.1f} ms per tree round, measured; {pay.draft_ms:.1f} ms per chain token) "
        f"the tree is expected to run at {pay.tree_speedup:.2f}\u00d7 plain decoding, the chain of {k} at {sk:.2f}\u00d7.",
    ]
    if pay.pays:
        out.append(f"On this machine the tree pays: {pay.tree_speedup / sk:.2f}\u00d7 the best chain.")
    elif pay.tree_speedup <= 1.0 and sk <= 1.0:
        out.append("On this machine neither pays: drafting and verifying cost more than the accepted tokens save.")
    else:
        extra = pay.tree_expected - ek
        why = (
            f"its extra {extra:.2f} expected tokens per round do not cover the larger pass and the drafting"
            if extra > 0
            else "it is not even expected to accept more than the chain"
        )
        out.append(f"On this machine the tree does not pay: {why}; a chain of {k} is the better choice here.")
    return out


def payoff_html(pay: TreePayoff | None) -> str:
    if pay is None:
        return ""
    depths = sorted({d for d, _ in pay.rates.by_depth_rank})
    ranks = sorted(pay.rates.by_rank)
    head = "<tr><th>sibling rank</th><th>all depths</th>" + "".join(f"<th>depth {d}</th>" for d in depths) + "</tr>"

    def cell(acc_seen: tuple[int, int] | None) -> str:
        if not acc_seen or not acc_seen[1]:
            return "<td>\u2014</td>"
        a, s = acc_seen
        return f'<td title="{a} accepted of {s} checked">{a / s:.2f} <span class="sv-muted">({s})</span></td>'

    rows = "".join(
        f"<tr><td>{r}</td>{cell(pay.rates.by_rank.get(r))}"
        + "".join(cell(pay.rates.by_depth_rank.get((d, r))) for d in depths)
        + "</tr>"
        for r in ranks
    )
    model = (
        f"Model: each node is accepted independently with the rate measured for its depth and sibling rank, given "
        f"that its parent was accepted and its earlier siblings rejected (a depth and rank checked fewer than "
        f"{MIN_CHECKED} times uses its rank's rate over all depths); costs from the trace's cost model. "
        f"Over {pay.rounds} tree rounds."
    )
    words = paragraphs_html(payoff_sentences(pay))
    return (
        f'<div class="specviz-text" id="tree-payoff-text"><p><b>Tree or chain?</b></p>{words}'
        f"{paragraphs_html(['Acceptance by sibling rank and depth (checked):'], 'sv-muted')}"
        f'<table class="specviz-table">{head}{rows}</table>{paragraphs_html([model], "sv-muted")}</div>'
    )


def payoff_figure(pay: TreePayoff, title: str | None = "Tree or chain: expected speedup on this machine") -> go.Figure:
    """The expected speedup of a chain of each k up to N, and the run's N-node tree as a line."""
    ks = [c[0] for c in pay.chain]
    fig = go.Figure()
    fig.add_bar(
        x=ks,
        y=[c[3] for c in pay.chain],
        name="chain of k",
        marker_color=DRAFT,
        customdata=[[c[1], c[2]] for c in pay.chain],
        hovertemplate="chain of %{x}: %{y:.2f}\u00d7 (expects %{customdata[0]:.2f} accepted, V(k+1) = %{customdata[1]:.1f} ms)<extra></extra>",
    )
    fig.add_scatter(
        x=[0.5, len(ks) + 0.5],
        y=[pay.tree_speedup] * 2,
        mode="lines",
        name=f"tree of {pay.nodes} nodes",
        line={"color": ACCEPTED, "width": 3},
        hovertemplate=f"tree of {pay.nodes}: {pay.tree_speedup:.2f}\u00d7 (expects {pay.tree_expected:.2f} accepted)<extra></extra>",
    )
    fig.add_scatter(
        x=[0.5, len(ks) + 0.5], y=[1, 1], mode="lines", name="plain decoding", line=PLAIN_LINE, hoverinfo="skip"
    )
    fig.update_xaxes(title_text="chain length k", tick0=1, dtick=whole_dtick(len(ks)))
    fig.update_yaxes(title_text="expected speedup", rangemode="tozero")
    return style_figure(fig, title, height=320)
