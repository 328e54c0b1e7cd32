"""The drafter protocol: propose up to k tokens with their q; hear back how many were accepted.

Every drafting strategy (a small model, prompt lookup, the target's own early layers) sits
behind these three methods, as in transformers' `CandidateGenerator`. The engine owns the
target and the acceptance rule; a drafter owns only its guesses and its own cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch

# Called after each drafted token with the drafter's confidence in it (its top probability
# at that position); returning False ends drafting for this round.
KeepGoing = Callable[[float], bool]


@dataclass
class Proposal:
    """Up to k drafted tokens and the distributions they were drawn from."""

    tokens: torch.Tensor  # (m,) long, 0 <= m <= k
    q: torch.Tensor | None  # (m, V) processed draft distributions; None: point masses on `tokens`
    ms: float = 0.0  # wall time spent drafting this round, setup_ms included
    # Of `ms`, what the run pays once rather than per round (a drafter's prefill of the prompt).
    setup_ms: float = 0.0
    passes: int = 0  # draft forward passes this round
    confidence: list[float] = field(default_factory=list)  # the draft's top probability per token
    # Cross-tokenizer drafters: one dict per draft token of the round, {"id", "text",
    # "candidates": indices into `tokens` of the target tokens it became}; None otherwise.
    alignment: list[dict] | None = None
    # A token tree: parents[i] is the index in `tokens` of node i's parent, -1 for a child of
    # the root (the last token of the context); parents come before children. None: a chain.
    parents: list[int] | None = None

    def __len__(self) -> int:
        return self.tokens.numel()


class Drafter(Protocol):
    name: str

    def begin(self, prompt_ids: torch.Tensor) -> None:
        """Start a new run on this prompt (1-D ids): reset and prefill any cache."""

    def propose(self, context: torch.Tensor, k: int, keep_going: KeepGoing) -> Proposal:
        """Propose up to k tokens to follow `context` (the prompt and all output so far)."""

    def accepted(self, n: int) -> None:
        """The first n proposed tokens were accepted; roll back to the context plus those n."""

    def unread(self, context_len: int) -> int:
        """How many of the context's `context_len` tokens the drafter has still to read before
        it can draft (0 for a drafter without a cache): what a round that drafts pays first."""
