"""A drafter that runs a language model: a small draft model, or the target's early layers.

It keeps its own KV cache across rounds. After proposing x_1..x_m it has seen the context
and x_1..x_{m-1}; told that n were accepted, it crops back to the context plus x_1..x_n,
and next round it feeds whatever it has not seen yet (the last accepted draft and the
token the target emitted, or every token of the rounds that drafted nothing) in one pass
before drafting on. The prompt, too, is fed at the first round that drafts, not at the
start: a run whose policy never drafts never pays for it, and where a pass over many tokens
is dear (quantised weights on a CPU) a long prompt's read can outweigh a short run.
"""

from __future__ import annotations

import time

import torch

from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, Sampling, TreeBudget, draft_chain, ms_since
from specviz.choices import AUTO
from specviz.lm.runtime import LM
from specviz.lm.sampling import Sampler


class ModelDrafter(Sampling, ChainDrafting):
    def __init__(self, name: str, lm: LM, sampler: Sampler, generator: torch.Generator | None, eos_ids: set[int]):
        self.name = name
        self._lm = lm
        self._sampler = sampler
        self._generator = generator
        self._eos = eos_ids
        self._context_len = 0
        self._prompt_len = 0

    def begin(self, prompt_ids: torch.Tensor) -> None:
        self._lm.reset()
        self._prompt_len = prompt_ids.numel()

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        self._context_len = context.numel()
        if k <= 0:
            return Proposal.empty(context)
        setup_ms = 0.0
        if self._lm.length == 0 and self._prompt_len > 1:  # the prompt, once: not a cost of this round
            self._lm.feed(context[: self._prompt_len - 1])
            setup_ms = ms_since(start)
        return draft_chain(
            lambda fed: self._sampler.logits(self._lm.feed(fed)[-1]),
            context[self._lm.length :],
            k,
            keep_going,
            self._eos,
            self._sampler,
            self._generator,
            start,
            setup_ms=setup_ms,
        )

    def accepted(self, n: int) -> None:
        self._lm.crop(self._context_len + n)

    def unread(self, context_len: int) -> int:
        return context_len - self._lm.length


def make(pair, settings, *, generator=None, history=()) -> "ModelDrafter":
    """The draft model, drafting a chain (through `cross_vocab` when its tokenizer differs)."""
    if pair.cross_tokenizer:
        from specviz.drafters.cross_vocab import make_cross_drafter

        return make_cross_drafter(
            pair, settings, generator, None if settings.vocab_method == AUTO else settings.vocab_method
        )
    from specviz.lm.prompt import stop_ids
    from specviz.lm.runtime import open_lm

    return ModelDrafter(
        settings.drafter,
        open_lm(pair.draft, pair.device),
        Sampler(settings, pair.vocab_size),
        generator,
        stop_ids(pair),
    )
