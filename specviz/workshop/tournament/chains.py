"""A draft model's chain, replayed from its one teacher-forced pass (`passes.DraftRows`).

Under greedy decoding a chain drafter's j-th proposal in a round starting at position i is
its greedy choice on the context text[:i+j] for as long as its earlier proposals matched the
text (the run's context then is the text). So one pass gives every round of every k: the
round accepts the consecutive positions where the choice equals the text. `TeacherForced`
answers the drafter protocol from those rows, so the engine's replay (`replay.py`) drives the
real length policies over it as it drives a real drafter.

What a round drafts after its first miss is never accepted, but how many tokens it drafts
there sets the verify pass's size, and a policy that stops on the draft's confidence
(cost-aware, heuristic) reads the confidence of each. Those tokens follow the draft's own
miss, not the text, so `Branches` runs the draft model on them, lazily and once per miss:
with them the replay is the run's, pass for pass. Without them (`branches=None`, for a policy
that reads no confidence) a token after a miss is taken to be no stop token.

It also keeps what the real drafter's cache would hold (`unread`), which the cost-aware policy
reads, and charges the draft's read of the prompt to its first drafting round, as the real one does.
"""

from __future__ import annotations

import torch

from specviz.drafters.base import ChainDrafting, KeepGoing, Proposal, TreeBudget, ranked
from specviz.lm import rows
from specviz.lm.runtime import LM
from specviz.lm.sampling import Sampler
from specviz.workshop.tournament.passes import DraftRows
from specviz.workshop.tournament.text import Text

OFF_TEXT = -1  # a token after a miss where its identity is not needed: never the text's, never a stop


class Branches:
    """What the draft drafts after missing at a position: its greedy choices on the text up to
    that position, its own miss, and its own choices after it (one pass per token, cached)."""

    def __init__(self, lm: LM, text: Text, draft: DraftRows, sampler: Sampler):
        self._lm, self._text, self._draft, self._sampler = lm, text, draft, sampler
        self._known: dict[int, list[tuple[int, float]]] = {}
        self._cached: list[int] = []  # the ids the LM's cache holds
        self.passes = 0

    def after(self, position: int, j: int) -> tuple[int, float]:
        """The j-th token (from 0) drafted after the miss at answer position `position`, and the
        draft's confidence in it."""
        got = self._known.setdefault(position, [])
        while len(got) <= j:
            got.append(self._next(position, got))
        return got[j]

    @torch.inference_mode()
    def _next(self, position: int, got: list[tuple[int, float]]) -> tuple[int, float]:
        text = self._text
        want = text.ids[: len(text.prompt_ids) + position] + [int(self._draft.argmax[position])] + [t for t, _ in got]
        same = 0
        for a, b in zip(self._cached, want):
            if a != b:
                break
            same += 1
        same = min(same, len(want) - 1)  # the last token is fed again for its logits
        self._lm.crop(same)
        logits = self._sampler.logits(
            self._lm.feed(torch.tensor(want[same:], dtype=torch.long, device=self._lm.device))
        )
        self._cached = want
        self.passes += 1
        return int(rows.argmax(logits[-1:])[0]), float(ranked(self._sampler, logits[-1]).max())


class TeacherForced(ChainDrafting):
    """The drafter protocol over a model's teacher-forced rows (see the module docstring)."""

    def __init__(self, name: str, text: Text, draft: DraftRows, branches: Branches | None, prefill_ms: float):
        self.name = name
        self._text, self._draft, self._branches = text, draft, branches
        self._answer = text.answer_ids
        self._prefill_ms = prefill_ms
        self._length = 0  # what the real drafter's cache would hold
        self._context_len = 0
        self._run_prompt = 0

    def begin(self, prompt_ids: torch.Tensor) -> None:
        self._length = 0
        self._run_prompt = prompt_ids.numel()  # the prompt and the first token, as the engine begins it

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        self._context_len = context.numel()
        if k <= 0:
            return Proposal.empty(context)
        setup_ms = self._prefill_ms if self._length == 0 and self._run_prompt > 1 else 0.0
        start = self._context_len - len(self._text.prompt_ids)
        tokens, confidence, missed = [], [], None
        for j in range(k):
            token, conf = self._guess(start + j, missed)
            tokens.append(token)
            confidence.append(conf)
            if not keep_going(conf) or token in self._text.eos:
                break
            # Under sampling a drafted token is a draw, not the greedy choice: the chain reads on
            # along the text (the sampled verdict draws each position's acceptance).
            if missed is None and self._text.settings.greedy and token != self._answer[start + j]:
                missed = start + j
        self._length = self._context_len + len(tokens) - 1
        return Proposal(
            tokens=torch.tensor(tokens, dtype=torch.long),
            q=None,
            setup_ms=setup_ms,
            ms=setup_ms,
            passes=len(tokens),
            confidence=confidence,
        )

    def _guess(self, position: int, missed: int | None) -> tuple[int, float]:
        if missed is None:
            return int(self._draft.argmax[position]), float(self._draft.confidence[position])
        if self._branches is None:
            return OFF_TEXT, 0.0
        return self._branches.after(missed, position - missed - 1)

    def accepted(self, n: int) -> None:
        self._length = min(self._length, self._context_len + n)

    def unread(self, context_len: int) -> int:
        return context_len - self._length
