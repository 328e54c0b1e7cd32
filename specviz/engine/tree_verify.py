"""Acceptance rules for a token tree, as pure functions, one per way the children were chosen.

A tree of n drafted nodes is given by `tokens` (n,) and `parents` (n,), parents before
children, -1 for the children of the root (the last output token). The target's
distributions come from one pass over [root, node 0, ..., node n-1]:

    p: (n + 1, V)   row 0 after the root, row i + 1 after node i

Each rule walks down from the root. At a node it checks the node's children in index order
(the drafter lists siblings best first); an accepted child becomes the next node; when every
child is rejected, or the node has none, the round ends by emitting one token from what is
left of the target's distribution there. Every rule gives output tokens distributed exactly
as the target's (see tests/test_tree_verify.py), provided it matches how the children were
chosen:

    tree_greedy             greedy decoding: accept the child equal to the target's argmax;
                            emit the argmax where none is.
    tree_point_masses       children chosen deterministically (the draft's top-B at each
                            node): check them in turn as point masses. Accept candidate c
                            with probability p'(c); after a rejection remove c from p' and
                            renormalise; if all are rejected, draw from p'. Sampling without
                            replacement, one candidate at a time.

p' starts as the target's distribution at the node. Every tree drafter here chooses its
children deterministically (the tree drafter's top-B, the copying drafters' continuations).
On a chain (one child per node) the point-mass rule is `verify.verify` with q None, and it
draws its randomness in the same order: one uniform per node up front, then the emitted
token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import torch

from specviz.engine.verify import remove_token
from specviz.lm.sampling import draw

Decision = Literal["accepted", "rejected", "unchecked"]
Rule = Literal["greedy", "point-masses"]


@dataclass
class TreeVerification:
    """The outcome of verifying one round's tree (plain Python values)."""

    rule: Rule
    tokens: list[int]  # the drafted tokens, as given
    parents: list[int]
    path: list[int]  # the accepted nodes, root to leaf
    decisions: list[Decision]  # per node
    p: list[float | None]  # per node: the target's p at its parent for its token, where checked
    u: list[float | None]  # per node: the uniform draw it was checked with; None when greedy or unchecked
    emitted: int  # the resampled or bonus token
    emitted_p: float  # the target's p of the emitted token at the end of the path (greedy: 1.0)
    emitted_kind: Literal["resampled", "bonus"]

    @property
    def accepted_tokens(self) -> list[int]:
        return [self.tokens[i] for i in self.path]

    @property
    def new_tokens(self) -> list[int]:
        """What this round adds to the output: the accepted path, then the emitted token."""
        return self.accepted_tokens + [self.emitted]


def children_of(parents: Sequence[int]) -> list[list[int]]:
    """children[r + 1] lists the children of node r in index order; children[0] the root's."""
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, par in enumerate(parents):
        if not -1 <= par < i:
            raise ValueError(f"node {i} has parent {par}: a parent must be -1 or an earlier node")
        kids[par + 1].append(i)
    return kids


def _check(tokens: torch.Tensor, parents: Sequence[int], p: torch.Tensor) -> None:
    n = tokens.numel()
    if len(parents) != n:
        raise ValueError(f"{n} tokens but {len(parents)} parents")
    if p.shape[0] != n + 1:
        raise ValueError(f"p needs n + 1 = {n + 1} rows (the root, then each node), got {p.shape[0]}")


def tree_greedy(tokens: torch.Tensor, parents: Sequence[int], p: torch.Tensor) -> TreeVerification:
    """Follow the target's argmax down the tree (p: distributions or logits, (n + 1, V)).

    At each node on the path its children are checked: the one equal to the argmax is
    accepted, the others rejected."""
    _check(tokens, parents, p)
    toks = tokens.tolist()
    best = p.argmax(-1).tolist()
    kids = children_of(parents)
    n = len(toks)
    decisions: list[Decision] = ["unchecked"] * n
    p_node: list[float | None] = [None] * n
    path: list[int] = []
    at = -1
    while True:
        nxt = None
        for c in kids[at + 1]:
            hit = toks[c] == best[at + 1] and nxt is None
            decisions[c] = "accepted" if hit else "rejected"
            p_node[c] = 1.0 if toks[c] == best[at + 1] else 0.0
            if hit:
                nxt = c
        if nxt is None:
            kind = "resampled" if kids[at + 1] else "bonus"
            return TreeVerification(
                "greedy", toks, list(parents), path, decisions, p_node, [None] * n, best[at + 1], 1.0, kind
            )
        path.append(nxt)
        at = nxt


def tree_point_masses(
    tokens: torch.Tensor, parents: Sequence[int], p: torch.Tensor, *, generator: torch.Generator | None = None
) -> TreeVerification:
    """Sequential point-mass verification, for children chosen deterministically (top-B).

    p: (n + 1, V) processed target distributions."""
    _check(tokens, parents, p)
    return _walk(tokens, parents, p, generator)


def _walk(tokens: torch.Tensor, parents: Sequence[int], p: torch.Tensor, generator) -> TreeVerification:
    toks = tokens.tolist()
    n = len(toks)
    kids = children_of(parents)
    # One uniform per node, drawn up front as `verify` does, so a chain sees the same draws.
    u_all = torch.rand(n, generator=generator, device=p.device, dtype=p.dtype).tolist()
    decisions: list[Decision] = ["unchecked"] * n
    p_node: list[float | None] = [None] * n
    u_node: list[float | None] = [None] * n
    path: list[int] = []
    at = -1
    while True:
        target = p[at + 1]
        residual = target
        nxt = None
        for c in kids[at + 1]:
            x = toks[c]
            u_node[c] = u_all[c]
            p_node[c] = float(target[x])
            # u < p'(x): a point mass's q(x) is 1; p' == 0 never accepts.
            if u_all[c] < float(residual[x]):
                decisions[c] = "accepted"
                nxt = c
                break
            decisions[c] = "rejected"
            residual = remove_token(residual, x)
        if nxt is None:
            kind = "resampled" if kids[at + 1] else "bonus"
            emitted = int(draw(residual, generator))
            return TreeVerification(
                "point-masses",
                toks,
                list(parents),
                path,
                decisions,
                p_node,
                u_node,
                emitted,
                float(target[emitted]),
                kind,
            )
        path.append(nxt)
        at = nxt
