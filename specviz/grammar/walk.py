"""A round's proposal under the grammar, before the target's pass: the one place every drafter's
proposal meets the grammar.

1. Each node is checked against the grammar's mask at its parent (the state after the path
   to it): a node the grammar forbids is dropped with everything under it, so no forbidden
   token is ever verified. A drafter that samples from a model already drew from the masked
   q and loses nothing here; a copying drafter or a tree loses the branches the grammar
   rules out.
2. Where the path of first children ends (the end of a chain; the root when nothing is left),
   the tokens the grammar forces there join the proposal as drafts the grammar chose:
   point masses (q = 1), marked forced, costing no drafting, verified in the same pass.
3. Each row of the target's pass (the root, then each node) gets its mask: the grammar's
   allowed tokens after the path to it.

The rule needs nothing else: min(1, p'/q') with the residual norm(max(0, p' - q')) keeps the
output distributed as the masked p' for any proposal distribution, a forced token's point
mass included; it is accepted with probability p'(x), with certainty where the grammar
allows that token alone (docs/GRAMMAR.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from specviz.grammar.matcher import Grammar

# The most forced tokens one round takes (a long constant string in a schema forces many).
MAX_FORCED = 32


@dataclass
class Walked:
    """A proposal under the grammar: the proposal to verify (with `allowed`, the target's mask
    per row), and per node the index it had in the drafter's proposal (-1 for a forced token
    the walk added)."""

    proposal: Any  # drafters.base.Proposal
    origin: list[int]
    chain: bool  # the drafter proposed a chain

    def heard(self, path: list[int]) -> list[int]:
        """The accepted path as the drafter tells it: a chain's whole path (the forced tail reads
        as the context moving on), a tree's nodes that were its own, in its own indices."""
        if self.chain:
            return path
        return [self.origin[i] for i in path if self.origin[i] >= 0]


def walk(grammar: Grammar, proposal: Any, room: int) -> Walked:
    """`proposal` (a `drafters.base.Proposal`) pruned to what the grammar allows, with the forced
    tokens where its first-child path ends, at most `room` nodes in all."""
    n = proposal.tokens.numel()
    tokens = proposal.tokens.tolist()
    parents = list(proposal.parents) if proposal.parents is not None else list(range(-1, n - 1))
    chain = proposal.parents is None
    paths: dict[int, tuple[int, ...]] = {-1: ()}  # the nodes kept that may have children
    keep: list[int] = []
    for i, (token, parent) in enumerate(zip(tokens, parents)):
        if parent in paths and len(keep) < room and bool(grammar.allowed(paths[parent])[token]):
            keep.append(i)
            if not grammar.ends(token):  # the run ends at a stop token: nothing under it
                paths[i] = paths[parent] + (token,)
    proposal = _kept(proposal, keep, parents)
    end = _chain_end(proposal)
    ended = end >= 0 and grammar.ends(int(proposal.tokens[end]))
    tail = [] if ended else grammar.forced(_path(proposal, end))[: min(MAX_FORCED, room - len(keep))]
    proposal = _with_forced(proposal, end, tail)
    allowed = grammar.rows([()] + [_path(proposal, i) for i in range(proposal.tokens.numel())])
    return Walked(replace(proposal, allowed=allowed), keep + [-1] * len(tail), chain)


def _kept(proposal: Any, keep: list[int], parents: list[int]) -> Any:
    """The proposal's nodes `keep` (each with its parent kept), renumbered."""
    if len(keep) == len(parents):
        return proposal
    new = {old: i for i, old in enumerate(keep)}
    index = torch.tensor(keep, dtype=torch.long)
    fields: dict[str, Any] = dict(
        tokens=proposal.tokens[index.to(proposal.tokens.device)],
        q=None if proposal.q is None else proposal.q[index.to(proposal.q.device)],
        confidence=[proposal.confidence[i] for i in keep if i < len(proposal.confidence)],
        forced=[new[i] for i in proposal.forced if i in new],
    )
    if proposal.parents is not None:
        fields["parents"] = [new.get(parents[i], -1) for i in keep]
    if proposal.alignment:
        fields["alignment"] = [
            replace(a, candidates=[new[c] for c in a.candidates if c in new])
            for a in proposal.alignment
            if any(c in new for c in a.candidates)
        ]
    if proposal.source is not None:
        s = proposal.source
        fields["source"] = replace(s, counts=_pick(s.counts, keep), origins=_pick(s.origins, keep))
    return replace(proposal, **fields)


def _pick(per_node: list, keep: list[int]) -> list:
    return [per_node[i] for i in keep] if len(per_node) > max(keep, default=-1) else per_node


def _chain_end(proposal: Any) -> int:
    """The last node of the path of first children from the root (-1: the root itself)."""
    if proposal.parents is None:
        return proposal.tokens.numel() - 1
    at = -1
    while at + 1 < len(proposal.parents) and (child := _first_child(proposal.parents, at)) is not None:
        at = child
    return at


def _first_child(parents: list[int], node: int) -> int | None:
    return next((i for i, par in enumerate(parents) if par == node), None)


def _path(proposal: Any, node: int) -> tuple[int, ...]:
    """The tokens from the root's child down to `node` (-1: none)."""
    tokens = proposal.tokens.tolist()
    if proposal.parents is None:
        return tuple(tokens[: node + 1])
    path = []
    while node >= 0:
        path.append(tokens[node])
        node = proposal.parents[node]
    return tuple(reversed(path))


def _with_forced(proposal: Any, end: int, tail: list[int]) -> Any:
    """The proposal with `tail` hung under node `end` as a chain of point masses."""
    if not tail:
        return proposal
    n, m = proposal.tokens.numel(), len(tail)
    device = proposal.tokens.device
    fields: dict[str, Any] = dict(
        tokens=torch.cat([proposal.tokens, torch.tensor(tail, dtype=torch.long, device=device)]),
        confidence=list(proposal.confidence) + [1.0] * m,
        forced=list(proposal.forced) + list(range(n, n + m)),
    )
    if proposal.q is not None:
        points = torch.nn.functional.one_hot(torch.tensor(tail), proposal.q.shape[-1])
        fields["q"] = torch.cat([proposal.q, points.to(proposal.q.dtype).to(proposal.q.device)])
    if proposal.parents is not None:
        parents = list(proposal.parents) + [end] + list(range(n, n + m - 1))
        # A tree of point masses left one wide takes the chain's pass, as `point_masses` states it
        # (a draft model's tree keeps its shape: its q rows were not sampled from).
        one_wide = proposal.ride is None and proposal.q is None and parents == list(range(-1, n + m - 1))
        fields["parents"] = None if one_wide else parents
    if proposal.source is not None and proposal.source.counts:
        s = proposal.source
        fields["source"] = replace(s, counts=list(s.counts) + [0] * m, origins=list(s.origins) + ["grammar"] * m)
    return replace(proposal, **fields)
