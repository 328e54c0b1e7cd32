"""One round of verification: a single target pass over the round's drafts, the acceptance
rule (`verify.verify_tree`), and the target's cache cut to the accepted path.

With the context ids[0..L) and the target's cache holding ids[0..L-1):

1. one target pass over [ids[L-1], node 0, ..., node n-1] gives p after the root and after
   every node. A chain (a proposal without `parents`) goes through `feed`, the pass V(n)
   measures; only a real tree goes through `feed_tree` under the tree mask (`lm.tree`),
   which costs more (llama.cpp spends a sequence per node);
2. the rule walks the drafts as a tree (a chain is the one-wide one) and emits one token at
   the end of the accepted path. A chain's q rows enter the check, as its tokens were
   sampled from them; a tree's children were chosen (the draft's top-B, a copy's
   continuations), so the rule checks them as point masses and its q is only recorded;
3. the target's cache keeps ids[0..L) and the accepted path (`crop` after a chain's pass,
   `keep_path` after a tree's), the emitted token left pending for the next pass.

A proposal's ride nodes (`drafters.base.Proposal.ride`) go into the tree pass after the
candidates; their logits are handed back apart and the cache keeps none of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from specviz.drafters.base import Proposal
from specviz.engine.verify import Outcome, verify_tree
from specviz.lm.runtime import LM
from specviz.lm.sampling import Sampler
from specviz.lm.timing import sync
from specviz.lm.tree import chain_parents


_NO_RIDE = torch.zeros(0, dtype=torch.long)


@dataclass
class Round:
    """One verified round: the rule's outcome and what the target's pass gave for it."""

    outcome: Outcome
    logits: torch.Tensor  # (n + 1, V) the target's logits (vocabulary-cut) after the root and after each node
    dist: torch.Tensor | None  # (n + 1, V) the distributions sampled from (None when greedy)
    target_ms: float  # the target's pass
    verify_ms: float  # the pass and the rule
    ride_logits: torch.Tensor | None = None  # (r, V) the target's logits (vocabulary-cut) at the proposal's ride nodes
    unmasked: torch.Tensor | None = None  # `logits` before the output format's mask (`Proposal.allowed`)


def tree_round(
    target: LM, sampler: Sampler, proposal: Proposal, root: int, generator: torch.Generator | None, greedy: bool
) -> Round:
    """Verify `proposal` (a tree, or a chain when `parents` is None) in one target pass.

    target: the target's cache, holding the context up to but not including `root`, the
    last token of the context.
    """
    x = proposal.tokens.to(target.device)
    n = x.numel()
    ride, ride_parents = _ride(proposal)
    as_tree = proposal.parents is not None or bool(ride_parents)
    start = time.perf_counter()
    head = torch.tensor([int(root)], dtype=torch.long, device=target.device)
    if as_tree:
        parents = _parents(proposal)
        ids = torch.cat([head, x, ride.to(target.device)])
        # Fed: the root, the candidates under it, then the ride nodes under the root or each other.
        fed_parents = [-1] + [par + 1 for par in parents] + [0 if par < 0 else 1 + n + par for par in ride_parents]
        every = sampler.logits(target.feed_tree(ids, fed_parents))
        logits, ride_logits = every[: n + 1], every[n + 1 :]
    else:
        context = target.length
        logits, ride_logits = sampler.logits(target.feed(torch.cat([head, x]) if n else head, keep=0)), None
    r = decide(sampler, proposal, logits, start, generator, greedy)
    if as_tree:
        target.keep_path([0] + [i + 1 for i in r.outcome.path])
    else:
        target.crop(context + 1 + len(r.outcome.path))
    r.ride_logits = ride_logits
    return r


def decide(
    sampler: Sampler,
    proposal: Proposal,
    logits: torch.Tensor,
    start: float,
    generator: torch.Generator | None,
    greedy: bool,
) -> Round:
    """The rule on the target's `logits` (vocabulary-cut) for `proposal` (its n + 1 rows), the pass
    having started at `start`, under the output format's mask `proposal.allowed` where it has
    one (p' then stands for p everywhere); the caches are the caller's. Also the prefill's
    first round, which drafted nothing and needs no pass of its own."""
    sync(logits)
    target_ms = (time.perf_counter() - start) * 1000
    unmasked, logits = logits, sampler.masked(logits, proposal.allowed)
    dist = None if greedy else sampler.distribution(logits)
    chain = proposal.parents is None
    outcome = verify_tree(
        proposal.tokens,
        _parents(proposal),
        logits if greedy else dist,
        proposal.q if chain else None,
        generator=generator,
        greedy=greedy,
    )
    sync(logits)
    verify_ms = (time.perf_counter() - start) * 1000
    if not chain and proposal.q is not None:  # recorded beside the point-mass check
        outcome = replace(outcome, q=_drafted_q(proposal))
    return Round(outcome, logits, dist, target_ms, verify_ms, unmasked=unmasked)


def _parents(proposal: Proposal) -> list[int]:
    n = proposal.tokens.numel()
    parents = list(proposal.parents) if proposal.parents is not None else chain_parents(n)
    if len(parents) != n:
        raise ValueError(f"the proposal has {n} tokens but {len(parents)} parents")
    return parents


def _drafted_q(proposal: Proposal) -> list[float]:
    """Per node: the draft's q of its token, from the proposal's rows."""
    n = proposal.tokens.numel()
    return proposal.q[torch.arange(n, device=proposal.q.device), proposal.tokens.to(proposal.q.device)].tolist()


def _ride(proposal: Proposal) -> tuple[torch.Tensor, list[int]]:
    """The proposal's ride nodes (none for most drafters), checked: parents -1 or earlier."""
    if proposal.ride is None or not proposal.ride.numel():
        return _NO_RIDE, []
    parents = list(proposal.ride_parents or [])
    if len(parents) != proposal.ride.numel() or any(not -1 <= par < i for i, par in enumerate(parents)):
        raise ValueError(f"ride nodes need one parent each, -1 or an earlier ride node (got {parents})")
    return proposal.ride.reshape(-1).long(), parents
