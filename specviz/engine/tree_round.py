"""One round of tree verification: a single target pass over the whole tree, the acceptance
rule that matches how the tree was drafted, and the target's cache cut to the accepted path.

With the context ids[0..L) and the target's cache holding ids[0..L-1):

1. one target pass over [ids[L-1], node 0, ..., node n-1] under the tree mask (`lm.tree`)
   gives p after the root and after every node;
2. the rule (`tree_verify`) walks down the tree and emits one token at the end of the
   accepted path: `tree_greedy` when greedy, else `tree_point_masses` (every drafter here
   chooses its children deterministically: the draft's top-B, the tree drafter's way);
3. the target's cache keeps ids[0..L) and the accepted path, the emitted token left pending
   for the next pass, exactly as the chain round's crop leaves it.

A proposal without `parents` is a chain and goes through the same steps. A proposal's ride
nodes (`drafters.base.Proposal.ride`) go into the same pass after the candidates; their
logits are handed back apart and the cache keeps none of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import torch

from specviz.drafters.base import Proposal
from specviz.engine.tree_verify import Decision, Rule, tree_greedy, tree_point_masses
from specviz.lm.sampling import Sampler
from specviz.lm.runtime import LM
from specviz.lm.tree import depths
from specviz.lm.timing import sync


@dataclass
class TreeRound:
    """What one tree round decided, per node of the proposal's tree and for the round."""

    rule: Rule
    path: list[int]  # accepted node indices, root to leaf
    accepted: list[int]  # their tokens
    emitted: int  # the token the target adds after the path
    emitted_kind: Literal["resampled", "bonus"]
    emitted_p: float  # the target's probability of the emitted token there (greedy: 1.0)
    tokens: list[int]  # per node: the drafted token
    parents: list[int]  # per node: its parent's index, -1 under the root
    depth: list[int]  # per node: 1 for children of the root
    p: list[
        float | None
    ]  # per node: the target's probability of its token at its parent, where checked (greedy: 1 or 0)
    q: list[float]  # per node: the draft's probability of its token at its parent (1.0 for point masses)
    u: list[float | None]  # per node: the uniform draw it was checked with (None when greedy or unchecked)
    decision: list[Decision]  # per node
    target_ms: float  # the target's tree pass
    verify_ms: float  # the pass and the rule
    logits: torch.Tensor  # (n + 1, V) the target's logits after the root and after each node (vocabulary-cut)
    dist: torch.Tensor | None  # (n + 1, V) the processed distributions (None when greedy)
    ride_logits: torch.Tensor | None = None  # (r, V) the processed logits at the proposal's ride nodes

    @property
    def new_tokens(self) -> list[int]:
        """What this round adds to the output: the accepted path, then the emitted token."""
        return self.accepted + [self.emitted]


def chain_parents(n: int) -> list[int]:
    return list(range(-1, n - 1))


def tree_round(
    target: LM, sampler: Sampler, proposal: Proposal, root: int, generator: torch.Generator | None, greedy: bool
) -> TreeRound:
    """Verify `proposal` (a tree, or a chain when `parents` is None) in one target pass.

    target: the target's cache, holding the context up to but not including `root`, the
    last token of the context.
    """
    x = proposal.tokens.to(target.device)
    n = x.numel()
    parents = list(proposal.parents) if proposal.parents is not None else chain_parents(n)
    if len(parents) != n:
        raise ValueError(f"the proposal has {n} tokens but {len(parents)} parents")

    ride, ride_parents = _ride(proposal)
    start = time.perf_counter()
    ids = torch.cat([torch.tensor([int(root)], dtype=torch.long, device=target.device), x, ride.to(target.device)])
    # Fed: the root, the candidates under it, then the ride nodes under the root or each other.
    fed_parents = [-1] + [par + 1 for par in parents] + [0 if par < 0 else 1 + n + par for par in ride_parents]
    every = sampler.logits(target.feed_tree(ids, fed_parents))
    logits, ride_logits = every[: n + 1], every[n + 1 :]
    sync(logits)
    target_ms = (time.perf_counter() - start) * 1000
    dist = None if greedy else sampler.distribution(logits)
    v = tree_greedy(x, parents, logits) if dist is None else tree_point_masses(x, parents, dist, generator=generator)
    sync(logits)
    verify_ms = (time.perf_counter() - start) * 1000
    target.keep_path([0] + [i + 1 for i in v.path])
    return TreeRound(
        rule=v.rule,
        path=v.path,
        accepted=v.accepted_tokens,
        emitted=v.emitted,
        emitted_kind=v.emitted_kind,
        emitted_p=v.emitted_p,
        tokens=x.tolist(),
        parents=parents,
        depth=[d + 1 for d in depths(parents)],
        p=v.p,
        q=_drafted_q(proposal),
        u=v.u,
        decision=v.decisions,
        target_ms=target_ms,
        verify_ms=verify_ms,
        logits=logits,
        dist=dist,
        ride_logits=ride_logits,
    )


def _drafted_q(proposal: Proposal) -> list[float]:
    """Per node: the draft's q of its token (1.0 where the proposal carries no q)."""
    n = proposal.tokens.numel()
    if proposal.q is None:
        return [1.0] * n
    return proposal.q[torch.arange(n, device=proposal.q.device), proposal.tokens.to(proposal.q.device)].tolist()


def _ride(proposal: Proposal) -> tuple[torch.Tensor, list[int]]:
    """The proposal's ride nodes (none for most drafters), checked: parents -1 or earlier."""
    if proposal.ride is None or not proposal.ride.numel():
        return torch.zeros(0, dtype=torch.long), []
    parents = list(proposal.ride_parents or [])
    if len(parents) != proposal.ride.numel() or any(not -1 <= par < i for i, par in enumerate(parents)):
        raise ValueError(f"ride nodes need one parent each, -1 or an earlier ride node (got {parents})")
    return proposal.ride.reshape(-1).long(), parents
