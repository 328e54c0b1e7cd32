"""Drafting strategies behind one protocol (see `base.Drafter`), and how long each round drafts.

The drafters and the length policies are the entries of `specviz.choices.DRAFTERS` and
`POLICIES`, each naming its module's `make`. Tree drafters are sized per round by the node
budget (a draft-model tree) or the tree cost rule (`tree_cost.py`, draft-free trees); the
cost-aware policy is built on the measured cost model (`specviz/costs/`).
`make_drafter` and `make_length` are the only places either is chosen.
"""

from __future__ import annotations

from typing import Sequence

import torch

from specviz.choices import DRAFT_FREE_TREE, DRAFTERS, MODEL_TREE, POLICIES
from specviz.drafters.base import Drafter, KeepGoing, Proposal
from specviz.drafters.cost_aware import CostAwareLength
from specviz.costs.measure import for_pair
from specviz.drafters.length import DraftLength, HeuristicLength
from specviz.drafters.tree_cost import TreeCost
from specviz.errors import UserError
from specviz.lm.runtime import missing
from specviz.lm.pair import ModelPair
from specviz.settings import GenerationSettings, no_draft_help

__all__ = [
    "Drafter",
    "KeepGoing",
    "Proposal",
    "DraftLength",
    "HeuristicLength",
    "CostAwareLength",
    "make_drafter",
    "make_length",
]


def make_drafter(
    pair: ModelPair,
    settings: GenerationSettings,
    *,
    generator: torch.Generator | None = None,
    history: Sequence[Sequence[int]] = (),
    target=None,
) -> Drafter:
    """The drafter `settings.drafter` names, on this pair; `generator` drives its sampling,
    `history` (a page session's earlier outputs) joins a draft-free drafter's corpus, `target`
    (the run's target LM) is what a drafter reading the target's own state reads."""
    choice = DRAFTERS[settings.drafter]
    why = choice.capability and missing(pair.runtime, choice.capability)
    if why:
        raise UserError(f"the {choice.name} drafter: {why}")
    if choice.needs_draft and pair.draft is None:
        raise UserError(f"the pair {pair.name!r} has no draft model: {no_draft_help()}")
    if choice.reads_target:
        if target is None:
            raise ValueError(f"the {choice.name} drafter reads the run's target LM: pass `target`")
        return choice.make(pair, settings, generator=generator, history=history, target=target)
    return choice.make(pair, settings, generator=generator, history=history)


def make_length(pair: ModelPair, settings: GenerationSettings) -> DraftLength:
    """The draft-length policy `settings.policy` names, up to k = settings.k, fresh for each
    run (a policy learns from its own rounds only)."""
    drafter = DRAFTERS[settings.drafter]
    if drafter.shape == MODEL_TREE:  # a tree's size is its node budget; k caps its depth
        return DraftLength(settings.k)
    policy = POLICIES[settings.policy]
    if drafter.shape == DRAFT_FREE_TREE and policy.adaptive:  # no draft confidence to schedule on: the tree rule
        return TreeCost(for_pair(pair), settings.k)
    return policy.make(pair, settings, drafter)
