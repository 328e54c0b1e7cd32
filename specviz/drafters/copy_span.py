"""How sure a copied continuation is: each node's chance of acceptance for the draft-free
drafters that copy earlier text (suffix decoding, prompt lookup), learnt from the target's
verdicts on the run's own copied spans.

A copied token's chance of acceptance, once the token before it was accepted, depends on the
span behind it: how many tokens of the context agree with the text the copy reads, one more
for each node above it in the proposal. A span of one token is weak evidence, one of
thirty-two strong, so the tree cost rule (`tree_cost`) sizes a proposal from these chances and
the measured V(n): long where the copy is sure, none outside it.

A match that picks the copy up just after where the last copied span broke off (an edit
replaced a few tokens and the answer goes on copying the same text) counts RESUMED_BONUS
tokens longer: the place it continues is evidence that a bare match of one or two tokens is
not. So a copy comes back as soon as one token of it agrees again. Right after the answer
broke off a long copy with one token of its own, the round may also guess that this token replaced
one of the copy's (a renamed name, a corrected word) and read on after it: a guess with its
own learnt chance (SKIP_PRIOR to start) that does not drift back while it waits, so edits that
insert rather than replace stop it for the run.

The chance per span length is counted per bin (accepted over checked nodes, from a prior);
the counts fade each round the drafter proposes and more slowly each round it waits, so after
a run of misses it stops proposing, and while it waits its estimate drifts back to the prior.
"""

from __future__ import annotations

from typing import Sequence

from specviz.drafters.base import TreeBudget, nodes_paid
from specviz.lm.tree import depths

# Bins of span length (each starts at its value) and each bin's prior chance: the share of
# copied nodes the bundled target accepted on a corpus kept apart from the bench's prompts
# (assets/copy_calibration.json, scripts/calibrate_copy_prior.py). It weighs PRIOR_WEIGHT checked
# nodes, one: a span length this run has not tried is drafted on the corpus's chance, and the
# run's own first verdicts outweigh it, so a prior that is wrong for this text does not stall the
# drafter (a copy never drafted would never be corrected) nor keep it drafting chance matches.
SPAN_BINS = (1, 2, 4, 8, 16, 32)
PRIOR_ACCEPT = (0.19, 0.57, 0.75, 0.79, 0.93, 0.99)
PRIOR_WEIGHT = 1.0
# Each round that proposed, the counts weigh this much less; each round that did not, this.
MEMORY = 0.95
IDLE_MEMORY = 0.98
# A match whose occurrence starts at most RESUME_WINDOW tokens after where the last copy broke
# off resumes it, while the answer has grown by at most RESUME_REACH tokens since.
RESUMED_BONUS = 8
RESUME_WINDOW = 8
RESUME_REACH = 24
# The chance, to start with, that the token which broke off a copy replaced one of its tokens,
# guessed only where the copy had run at least SKIP_SPAN tokens (inside a copy, not a chance match).
SKIP_PRIOR = 0.5
SKIP_SPAN = 8

Source = tuple[int, int]  # (document, index of the token there)


def span_bin(span: int) -> int:
    return max(i for i, lo in enumerate(SPAN_BINS) if span >= lo) if span >= 1 else 0


class CopyEvidence:
    """The learnt chances and where the last copy broke off (see the module docstring)."""

    def __init__(self):
        self._bins = [[0.0, 0.0] for _ in SPAN_BINS]  # per bin: accepted, checked (beyond the prior)
        self._skip = [0.0, 0.0]  # the same for the first node of a guess that skips a replaced token
        self._last: tuple[int, list[int], list[Source], bool] | None = None  # span, parents, sources, skip
        self._anchor: tuple[Source, int, int] | None = None  # where the copy broke off, context length, span then
        self._length = 0

    def rate(self, span: int) -> float:
        """The chance a node whose span is `span` tokens is accepted once its parent is."""
        b = span_bin(span)
        accepted, checked = self._bins[b]
        return (accepted + PRIOR_ACCEPT[b] * PRIOR_WEIGHT) / (checked + PRIOR_WEIGHT)

    def skip_rate(self) -> float:
        """The chance that the token which broke off a copy replaced one of its tokens."""
        accepted, checked = self._skip
        return (accepted + SKIP_PRIOR * PRIOR_WEIGHT) / (checked + PRIOR_WEIGHT)

    def chances(self, span: int, parents: Sequence[int], shares: Sequence[float], *, skip: bool = False) -> list[float]:
        """Each node's chance of lying on the accepted path: down its path, the share of its
        parent's occurrences that continued through it times the rate at its own span (a
        skipping guess's first nodes: the skip rate)."""
        out: list[float] = []
        for parent, share, d in zip(parents, shares, depths(parents)):
            above = out[parent] if parent >= 0 else 1.0
            out.append(above * share * (self.skip_rate() if skip and d == 0 else self.rate(span + d)))
        return out

    def offer(
        self,
        span: int,
        parents: list[int],
        shares: Sequence[float],
        sources: list[Source],
        context_len: int,
        budget: TreeBudget | None,
        *,
        skip: bool = False,
    ) -> list[float]:
        """The chances of the candidate nodes the round verifies (as many as `budget` pays
        for, `chances` for what each share and source stand for), which it then proposes."""
        chances = self.chances(span, parents, shares, skip=skip)
        n = nodes_paid(budget, chances)
        if n:
            self.proposed(span, parents[:n], sources[:n], context_len, skip=skip)
        return chances[:n]

    def skip_source(self, context_len: int) -> Source | None:
        """Where the copy reads on if the context's last token replaced the one the copy broke
        off at (only right after a copy of SKIP_SPAN tokens or more broke off), else None."""
        if self._anchor is None:
            return None
        (doc, at), since, span = self._anchor
        return (doc, at + 1) if context_len == since + 1 and span >= SKIP_SPAN else None

    def broke_off(self) -> tuple[Source, int] | None:
        """Where the last copy broke off (the source token not written) and the context's length then."""
        return None if self._anchor is None else (self._anchor[0], self._anchor[1])

    def resumes(self, source: Source, length: int, context_len: int) -> bool:
        """Whether an occurrence of a `length`-token match, ending at `source`, starts just
        after where the last copy broke off (within reach of it)."""
        if self._anchor is None:
            return False
        (doc, at), since, _ = self._anchor
        start = source[1] - length + 1
        return source[0] == doc and at <= start <= at + RESUME_WINDOW and context_len - since <= RESUME_REACH

    def proposed(
        self, span: int, parents: list[int], sources: list[Source], context_len: int, *, skip: bool = False
    ) -> None:
        """The round proposes these nodes (each read at `sources`) behind a span of `span`
        (`skip`: guessing that the last token replaced one of the copy's)."""
        self._last = (span, parents, sources, skip)
        self._length = context_len

    def waited(self) -> None:
        self._last = None

    def heard(self, path: list[int]) -> None:
        """The target accepted these nodes of the last proposal (none: a plain round)."""
        last, self._last = self._last, None
        memory = MEMORY if last is not None else IDLE_MEMORY
        for pair in self._bins:  # fade: recent rounds count, and a waiting drafter returns to its prior
            pair[0] *= memory
            pair[1] *= memory
        if last is None:
            return
        self._skip = [self._skip[0] * MEMORY, self._skip[1] * MEMORY]  # fades only as it is tried again
        span, parents, sources, skip = last
        path = [i for i in path if i < len(parents)]  # a forced tail past its offer (an output format's)
        on_path = set(path)
        for i, (parent, d) in enumerate(zip(parents, depths(parents))):
            if parent < 0 or parent in on_path:  # checked: its parent was accepted
                b = self._skip if skip and d == 0 else self._bins[span_bin(span + d)]
                b[0] += i in on_path
                b[1] += 1
        if skip and not path:
            return  # the answer did not replace one token: the copy still broke off where it did
        # Where the copy broke off: the source token after the last accepted one.
        doc, at = sources[path[-1]] if path else sources[0]
        self._anchor = ((doc, at + 1 if path else at), self._length + len(path), span + len(path))


RESUMED, SKIPPED = "resumed", "skipped"  # how a round found its copy, beside a plain match


def sizing_note(span: int, how: str, rate: float, kept: int, offered: int) -> str:
    """How a round was sized, in the words the Round inspector shows."""
    s = "s" if span != 1 else ""
    if how == SKIPPED:
        head = (
            "The last token broke off the copy, so the round guesses it replaced one of the copy's tokens and reads "
            "on after that token: a guess"
        )
    elif how == RESUMED:
        head = (
            f"The match starts just after where the last copied span broke off, so it resumes that copy and "
            f"counts as a span of {span} token{s}: a copied token behind a span this long"
        )
    else:
        head = f"The match is a span of {span} token{s}: a copied token behind a span this long"
    return (
        f"{head} is taken to be accepted {rate:.0%} of the time once the token before it is (a prior, then this "
        f"run's verdicts). Priced on the measured pass costs V(n), the round verified {kept} of the {offered} "
        f"candidate{'s' if offered != 1 else ''}."
    )
