"""Drafting strategies behind one protocol (see `base.Drafter`).

    model       a smaller draft model with its own KV cache
    lookup      prompt lookup: continue the latest n-gram match in the context
    early-exit  the target's own first L layers, final norm and LM head
"""

from __future__ import annotations

import torch

from specviz.drafters.base import Drafter, KeepGoing, Proposal
from specviz.drafters.early_exit import EarlyExitForward, default_layers
from specviz.drafters.length import AdaptiveLength, DraftLength
from specviz.drafters.lookup import LookupDrafter
from specviz.drafters.model import ModelDrafter
from specviz.lm.cached import CachedLM, model_forward
from specviz.lm.prompt import stop_ids
from specviz.lm.sampling import Sampler
from specviz.errors import UserError
from specviz.models.pair import ModelPair
from specviz.settings import GenerationSettings

__all__ = ["Drafter", "KeepGoing", "Proposal", "DraftLength", "AdaptiveLength", "make_drafter", "make_length"]


def make_drafter(pair: ModelPair, settings: GenerationSettings, *, generator: torch.Generator | None = None) -> Drafter:
    """The drafter `settings.drafter` names, on this pair; `generator` drives its sampling."""
    sampler = Sampler(settings, pair.vocab_size)
    if settings.drafter == "lookup":
        return LookupDrafter()
    if settings.drafter == "early-exit":
        layers = settings.early_exit_layers or default_layers(pair.target)
        forward = EarlyExitForward(pair.target, layers)
        lm = CachedLM(forward, pair.target.config, pair.device)
        return ModelDrafter(f"early-exit-{layers}", lm, sampler, generator, stop_ids(pair))
    if pair.draft is None:
        raise UserError(f"the pair {pair.name!r} has no draft model: use the lookup or early-exit drafter")
    lm = CachedLM(model_forward(pair.draft), pair.draft.config, pair.device)
    return ModelDrafter("model", lm, sampler, generator, stop_ids(pair))


def make_length(settings: GenerationSettings) -> DraftLength:
    """The draft-length policy: fixed k, or adaptive up to k."""
    if settings.adaptive:
        return AdaptiveLength(settings.k, threshold=settings.adaptive_threshold)
    return DraftLength(settings.k)
