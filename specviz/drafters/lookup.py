"""Prompt lookup: propose what followed the latest earlier occurrence of the last n tokens.

No second model. Code and edits repeat their context (names, whole lines), and there the
continuation of an n-gram match is often right. Each proposal is certain (q is a point
mass), and the acceptance rule still holds: a drafted token is then accepted with
probability p(x) and, if rejected, replaced from p with x removed.

How much of the continuation a round verifies comes from the evidence behind it
(`copy_span.CopyEvidence`): how far back the occurrence agrees with the context's end, and
how often the run's copied spans of that length were accepted, priced by the tree cost rule
on the measured V(n) where the policy is adaptive: long inside a copy, nothing outside it.
"""

from __future__ import annotations

import time

import torch

from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, TreeBudget, ms_since
from specviz.drafters.copy_span import RESUMED_BONUS, CopyEvidence
from specviz.choices import LOOKUP
from specviz.lm.tree import chain_parents

MAX_SPAN = 32  # how far back an occurrence's agreement with the context is counted


class LookupDrafter(ChainDrafting):
    name = LOOKUP

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.evidence = CopyEvidence()

    def begin(self, prompt_ids: torch.Tensor) -> None:
        self.evidence = CopyEvidence()

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        at, span, skip = self._find(context) if k > 0 else (None, 0, False)
        tokens = context[at : at + k] if at is not None else context[:0]
        self.evidence.waited()
        n = tokens.numel()
        sources = [(0, at + i) for i in range(n)]
        chances = self.evidence.offer(span, chain_parents(n), [1.0] * n, sources, context.numel(), budget, skip=skip)
        return Proposal(tokens=tokens[: len(chances)], q=None, ms=ms_since(start), confidence=chances)

    def _find(self, context: torch.Tensor) -> tuple[int | None, int, bool]:
        """Where the round's continuation starts, the span behind it, and whether it is the
        guess that the last token replaced one of the copy's (`copy_span`)."""
        at = continuation_start(context, self.max_ngram, self.min_ngram)
        span = agreement(context, at, MAX_SPAN) if at is not None else 0
        if at is not None and self.evidence.resumes((0, at - 1), span, context.numel()):
            return at, span + RESUMED_BONUS, False
        skip = self.evidence.skip_source(context.numel())
        if skip is not None and skip[1] < context.numel() and self.evidence.skip_rate() > self.evidence.rate(span):
            return skip[1], RESUMED_BONUS, True
        return at, span, False

    def accepted(self, n: int) -> None:
        self.evidence.heard(list(range(n)))


def continuation_start(context: torch.Tensor, max_ngram: int = 3, min_ngram: int = 1) -> int | None:
    """Where the continuation of the latest earlier match of the context's last n tokens
    starts, trying the longest n first; None when nothing matches."""
    length = context.numel()
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        windows = context[: length - 1].unfold(0, n, 1)  # every n-gram that has a successor
        hits = (windows == context[length - n :]).all(dim=1).nonzero()
        if hits.numel():
            return int(hits[-1]) + n  # the latest match
    return None


def agreement(context: torch.Tensor, at: int, most: int) -> int:
    """How many tokens before `at` agree with the context's last ones, up to `most`."""
    n = min(most, at)
    before = context[at - n : at].flip(0)
    end = context[context.numel() - n :].flip(0)
    differ = (before != end).nonzero()
    return int(differ[0]) if differ.numel() else n


def make(pair, settings, *, generator=None, history=()) -> LookupDrafter:
    return LookupDrafter()
