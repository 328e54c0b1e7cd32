"""Drafting strategies behind one protocol (see `base.Drafter`), and how long each round drafts.

    model       a smaller draft model with its own KV cache
    tree        the draft model growing a tree of guesses, verified in one target pass
    lookup      prompt lookup: continue the latest n-gram match in the context
    early-exit  the target's own first L layers, final norm and LM head
    suffix      a speculation tree from what followed the context's longest earlier match
    lookahead   the target's own Jacobi iterations guess n-grams, verified as a tree

Draft-length policies (`length.py`, `cost_aware.py`, `tree_cost.py`): fixed k,
transformers' heuristic schedule, and the cost-aware policy built on the measured cost model
(`cost_model.py`); the draft-free trees' cost-aware policy sizes each tree by it.
`make_drafter` and `make_length` are the only places either is chosen.
"""

from __future__ import annotations

from typing import Sequence

import torch

from specviz.drafters.base import Drafter, KeepGoing, Proposal
from specviz.drafters.cost_aware import CostAwareLength
from specviz.drafters.cost_model import CostModel, for_pair
from specviz.drafters.cross_vocab import make_cross_drafter
from specviz.drafters.length import DraftLength, HeuristicLength
from specviz.drafters.lookahead import LookaheadDrafter
from specviz.drafters.lookup import LookupDrafter
from specviz.drafters.suffix import SuffixDrafter
from specviz.drafters.tree_cost import TreeCost
from specviz.drafters.model import ModelDrafter
from specviz.drafters.tree import TreeDrafter
from specviz.errors import UserError
from specviz.lm.cached import CachedLM
from specviz.lm.runtime import EARLY_EXIT, TREE, missing, open_lm
from specviz.lm.prompt import stop_ids
from specviz.lm.sampling import Sampler
from specviz.models.pair import ModelPair
from specviz.settings import DRAFT_FREE_TREES, GenerationSettings, no_draft_help

__all__ = ["Drafter", "KeepGoing", "Proposal", "DraftLength", "HeuristicLength", "CostAwareLength", "CostModel",
           "make_drafter", "make_length"]


def make_drafter(pair: ModelPair, settings: GenerationSettings, *, generator: torch.Generator | None = None,
                 history: Sequence[Sequence[int]] = ()) -> Drafter:
    """The drafter `settings.drafter` names, on this pair; `generator` drives its sampling,
    `history` (a page session's earlier outputs) joins the suffix drafter's corpus."""
    sampler = Sampler(settings, pair.vocab_size)
    if settings.drafter == "lookup":
        return LookupDrafter()
    if settings.drafter in DRAFT_FREE_TREES:
        why = missing(pair.runtime, TREE)
        if why:
            raise UserError(f"the {settings.drafter} drafter verifies a tree: {why}")
        if settings.drafter == "suffix":
            return SuffixDrafter(settings.suffix_max_nodes, settings.suffix_min_score, history)
        return LookaheadDrafter(settings.lookahead_window, settings.lookahead_ngram, settings.lookahead_candidates)
    if settings.drafter == "early-exit":
        why = missing(pair.runtime, EARLY_EXIT)
        if why:
            raise UserError(f"the early-exit drafter: {why}")
        from specviz.drafters.early_exit import EarlyExitForward  # transformers' masks: 2 s of import

        layers = early_exit_layers(pair, settings)
        forward = EarlyExitForward(pair.target, layers)
        lm = CachedLM(forward, pair.target.config, pair.device)
        return ModelDrafter(f"early-exit-{layers}", lm, sampler, generator, stop_ids(pair))
    if pair.draft is None:
        raise UserError(f"the pair {pair.name!r} has no draft model: {no_draft_help()}")
    if pair.cross_tokenizer:
        if settings.drafter == "tree":
            raise UserError("the tree drafter needs a draft that shares the target's tokenizer; this pair's does not")
        return make_cross_drafter(pair, settings, generator, None if settings.vocab_method == "auto" else settings.vocab_method)
    if settings.drafter == "tree":
        return TreeDrafter(f"tree-{settings.tree_nodes}x{settings.tree_width}", open_lm(pair.draft, pair.device), sampler,
                           stop_ids(pair), nodes=settings.tree_nodes, width=settings.tree_width)
    return ModelDrafter("model", open_lm(pair.draft, pair.device), sampler, generator, stop_ids(pair))


def make_length(pair: ModelPair, settings: GenerationSettings) -> DraftLength:
    """The draft-length policy `settings.policy` names, up to k = settings.k, fresh for each
    run (a policy learns from its own rounds only). The cost-aware one reads the pair's
    measured cost model, with D for the drafter the settings name."""
    if settings.policy == "fixed" or settings.drafter == "tree":
        # A tree's size is its node budget; k caps its depth.
        return DraftLength(settings.k)
    if settings.drafter in DRAFT_FREE_TREES:  # no draft confidence to schedule on: the tree rule
        return TreeCost(for_pair(pair).copy(), settings.k)
    if settings.policy == "heuristic":
        return HeuristicLength(settings.k, threshold=settings.adaptive_threshold)
    cost = for_pair(pair).copy()
    if settings.drafter == "lookup":
        return CostAwareLength(cost, settings.k, draft_ms=0.0, confidence=False)
    if settings.drafter == "early-exit":
        # The first L of the target's layers cost about L / all of a one-token pass.
        share = early_exit_layers(pair, settings) / pair.target.config.num_hidden_layers
        return CostAwareLength(cost, settings.k, draft_ms=cost.target * share)
    return CostAwareLength(cost, settings.k)


def early_exit_layers(pair: ModelPair, settings: GenerationSettings) -> int:
    from specviz.drafters.early_exit import default_layers

    return settings.early_exit_layers or default_layers(pair.target)
