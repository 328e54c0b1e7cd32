"""The acceptance rule of speculative decoding, for a chain or a token tree, as a pure function.

A round's drafts are n nodes: `tokens` and `parents`, parents before children, -1 for a
child of the root (the last output token). A chain is the one-wide tree with parents
-1, 0, 1, ... (`chain_parents`), so one walk serves both. The target's distributions come
from one pass over [root, node 0, ..., node n-1]: p (n + 1, V), row 0 after the root and
row i + 1 after node i, after the same temperature / top-k / top-p processing as q.

The walk starts at the root. At a node it checks the node's children in index order
(drafters list siblings best first) against p', which starts as p there; an accepted child
becomes the next node. A child is checked as the draft chose it:

    sampled from q (a chain from a draft model, q given):
        accept x with probability min(1, p'(x) / q(x)); else p' <- norm(max(0, p' - q))
    chosen with certainty (prompt lookup, copies, the draft's top-B; q None): a point mass,
        accept x with probability p'(x); else remove x from p' and renormalise

When no child is accepted the round emits one token from p': "resampled" after a rejection,
"bonus" at a leaf, where p' is p. The output is distributed exactly as p (the Monte Carlo
checks in tests/test_verify.py and tests/test_verify_tree.py). q rows are taken on one-wide
trees only: siblings sampled from one q would need a multi-draft rule, and no drafter here
samples them. Greedy decoding is the limit case, its own walk: accept the child equal to
argmax p, emit the argmax where none is.

Randomness is drawn in one order for every shape: one uniform per node up front, then the
emitted token's draw, so a seeded run gives the same tokens whichever way a chain is stated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import torch

from specviz.lm import rows
from specviz.lm.tree import chain_parents
from specviz.lm.sampling import draw

Decision = Literal["accepted", "rejected", "unchecked"]


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) over the last dimension, row by row.

    Where a row's residual is all zeros (p <= q everywhere, i.e. p == q for distributions),
    a rejection cannot happen in exact arithmetic; if rounding makes one happen anyway, the
    right fallback is p itself, so that row returns p instead of dividing by zero.
    """
    r = (p - q).clamp_min(0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / torch.where(mass > 0, mass, torch.ones_like(mass)), p)


def accepts(u, px, qx):
    """The check of drafted tokens, element-wise: x drawn from q is accepted with probability
    min(1, p(x) / q(x)), as u < p(x) / q(x) for u ~ U(0, 1), written without dividing (q(x) > 0
    where x was drawn from q; p(x) = 0 never accepts; a point mass has q(x) = 1), on tensors,
    numpy arrays or floats alike: one round's nodes here, the lossless lab's millions of draws
    at once (workshop/lossless.py)."""
    return u * qx < px


def remove_token(dist: torch.Tensor, token: int | torch.Tensor) -> torch.Tensor:
    """dist with `token` removed and renormalised: the residual after a point-mass draft is
    rejected. dist itself if nothing would be left (then the rejection was a rounding
    artefact: the token held all the mass)."""
    mass = torch.zeros_like(dist)
    mass[token] = 1.0
    return residual_distribution(dist, mass)


@dataclass
class Outcome:
    """What verifying one round decided, per node and for the round (plain Python values)."""

    tokens: list[int]  # per node: the drafted token
    parents: list[int]  # per node: its parent's index, -1 under the root
    decisions: list[Decision]  # per node
    p: list[float]  # per node: the target's p of its token at its parent (greedy: 1 at the argmax, else 0)
    q: list[float]  # per node: the draft's q of its token there (1.0 for a point mass)
    u: list[float | None]  # per node: the uniform it was checked with; None when greedy or unchecked
    path: list[int]  # the accepted nodes, root to leaf
    emitted: int  # the resampled or bonus token
    emitted_p: float  # the target's p of the emitted token at the end of the path (greedy: 1.0)
    emitted_kind: Literal["resampled", "bonus"]

    @property
    def n_accepted(self) -> int:
        return len(self.path)

    @property
    def new_tokens(self) -> list[int]:
        """What this round adds to the output: the accepted path, then the emitted token."""
        return [self.tokens[i] for i in self.path] + [self.emitted]


def children_of(parents: Sequence[int]) -> list[list[int]]:
    """children[r + 1] lists the children of node r in index order; children[0] the root's."""
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, par in enumerate(parents):
        if not -1 <= par < i:
            raise ValueError(f"node {i} has parent {par}: a parent must be -1 or an earlier node")
        kids[par + 1].append(i)
    return kids


def verify(
    draft_tokens: torch.Tensor,
    p: torch.Tensor,
    q: torch.Tensor | None = None,
    *,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> Outcome:
    """The rule on a chain x_1..x_k: `verify_tree` with parents -1, 0, 1, ...

    p: (k+1, V) target distributions at the k drafted positions and the bonus position (in
    greedy mode only each row's argmax is used, so logits do as well); q: (k, V) the draft
    distributions the tokens were sampled from, or None for point masses."""
    return verify_tree(draft_tokens, chain_parents(draft_tokens.numel()), p, q, generator=generator, greedy=greedy)


def verify_tree(
    tokens: torch.Tensor,
    parents: Sequence[int],
    p: torch.Tensor,
    q: torch.Tensor | None = None,
    *,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> Outcome:
    """Apply the acceptance rule to one round of n nodes.

    tokens: (n,) ids; parents: n indices (-1 or an earlier node); p: (n + 1, V) as in the
    module docstring; q: (n, V) the rows a one-wide tree's tokens were sampled from (row i
    at node i's parent), or None for point masses; generator: the source of the uniform
    draws and of the emitted token's sample."""
    parents = list(parents)
    kids = children_of(parents)
    n = len(parents)
    x = tokens.reshape(-1).to(p.device)
    if x.numel() != n:
        raise ValueError(f"{x.numel()} tokens but {n} parents")
    if p.shape[0] != n + 1:
        raise ValueError(f"p needs n + 1 = {n + 1} rows (the root, then each node), got {p.shape[0]}")
    if q is not None and q.shape[0] != n:
        raise ValueError(f"q needs n = {n} rows, got {q.shape[0]}")
    if q is not None and any(len(c) > 1 for c in kids):
        raise ValueError("q rows are checked on a one-wide tree only: siblings here are chosen, not sampled")
    if greedy:
        return _greedy(x.tolist(), parents, kids, p)
    return _sampled(x, parents, kids, p, q, generator)


def _greedy(toks: list[int], parents: list[int], kids: list[list[int]], p: torch.Tensor) -> Outcome:
    best = rows.argmax(p).tolist()
    hit = [t == best[par + 1] for t, par in zip(toks, parents)]
    n = len(toks)
    decisions: list[Decision] = ["unchecked"] * n
    path: list[int] = []
    at = -1
    while True:
        nxt = None
        for c in kids[at + 1]:  # the first child equal to the argmax is accepted, the rest rejected
            decisions[c] = "accepted" if hit[c] and nxt is None else "rejected"
            nxt = c if decisions[c] == "accepted" else nxt
        if nxt is None:
            kind = "resampled" if kids[at + 1] else "bonus"
            return Outcome(
                toks, parents, decisions, [float(h) for h in hit], [1.0] * n, [None] * n, path, best[at + 1], 1.0, kind
            )
        path.append(nxt)
        at = nxt


def _sampled(
    x: torch.Tensor, parents: list[int], kids: list[list[int]], p: torch.Tensor, q: torch.Tensor | None, generator
) -> Outcome:
    n = len(parents)
    at_parent = torch.tensor([par + 1 for par in parents], dtype=torch.long, device=p.device)
    px = p[at_parent, x]
    qx = q[torch.arange(n, device=q.device), x.to(q.device)].to(p.device) if q is not None else torch.ones_like(px)
    u = torch.rand(n, generator=generator, device=p.device, dtype=p.dtype)
    # In p's dtype. This is each node's check against p itself, which is p' for a first child.
    first = accepts(u, px, qx).tolist()
    toks, u_l = x.tolist(), u.tolist()
    decisions: list[Decision] = ["unchecked"] * n
    u_node: list[float | None] = [None] * n
    path: list[int] = []
    at = -1
    while True:
        left = None  # p' after this node's rejected children; None while it is p
        nxt = None
        for c in kids[at + 1]:
            u_node[c] = u_l[c]
            # A later sibling is a point mass (q rows come one-wide), checked against p'.
            ok = first[c] if left is None else accepts(u_l[c], float(left[toks[c]]), 1.0)
            if ok:
                decisions[c], nxt = "accepted", c
                break
            decisions[c] = "rejected"
            base = p[at + 1] if left is None else left
            left = residual_distribution(base, q[c]) if q is not None else remove_token(base, toks[c])
        if nxt is None:
            emitted = int(draw(p[at + 1] if left is None else left, generator))
            kind = "resampled" if kids[at + 1] else "bonus"
            return Outcome(
                toks,
                parents,
                decisions,
                px.tolist(),
                qx.tolist(),
                u_node,
                path,
                emitted,
                float(p[at + 1, emitted]),
                kind,
            )
        path.append(nxt)
        at = nxt
