"""The engine's round loop with the target's pass replaced by the text: a run replayed.

`replay` steps as `engine.speculative.SpeculativeDecoder.step` does: the prefill gives the first
token; then each round the length policy sets the most tokens to draft (told what the drafter
has still to read and what the run may still make), the drafter proposes (a chain, or a tree
with or without ride nodes), the verdict walks the proposal, the drafter hears the accepted
path, stop tokens and the token limit cut what is kept, and the policy learns from the round.
The drafters and policies are the real ones (`drafters.make_drafter`, `make_length`), so their
own state (a copy's learnt chances, lookahead's pool, the cost-aware policy's estimates) moves
as in a run.

The verdict is the target's: under greedy decoding a node is accepted when its token is the
text's (`greedy_path`: the text is the target's greedy output); under sampling
(`sampled.SampledVerdict`) with the chance the rule gives it. A policy that times its rounds
reads `clock`, which the caller advances by each round's predicted cost (`price.py`), so the
cost-aware policy decides as it would on the machine whose costs priced the round.

Where a drafter's proposal needs what only a run has, the replay says so: lookahead's window
rides on the target's logits at its own guesses, which the text does not hold, so a replayed
window learns nothing (`observed` stays False and the result is marked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from specviz.drafters.base import Drafter, Proposal
from specviz.drafters.length import DraftLength
from specviz.engine.verify import children_of
from specviz.workshop.tournament.text import Text


@dataclass
class Round:
    start: int  # the answer position of the round's first new token
    drafted: int  # candidate nodes verified (0: a plain round)
    accepted: int  # the accepted path's length, as the round's event counts it
    tokens: int  # new tokens the round added (accepted, then the emitted one, cut at a stop)
    passes: int = 0  # draft model passes
    ride: int = 0  # nodes that rode in the pass without being candidates
    tree: bool = False  # a tree pass (not a chain's)
    setup_ms: float = 0.0  # what the drafter paid once, in this round (its read of the prompt)
    draft_ms: float = 0.0  # the drafter's own time, as timed in the replay (a draft-free drafter's work)


class Verdict(Protocol):
    def __call__(self, proposal: Proposal, start: int) -> list[int]:
        """The accepted path (node indices) of `proposal` in a round starting at answer position `start`."""


class Clock:
    """A policy's clock that the replay moves by each round's predicted ms."""

    def __init__(self):
        self.s = 0.0

    def __call__(self) -> float:
        return self.s

    def advance(self, ms: float) -> None:
        self.s += ms / 1000


def greedy_path(answer: list[int]) -> Verdict:
    """Follow the child whose token is the text's next one, as the greedy rule follows the argmax."""

    def walk(proposal: Proposal, start: int) -> list[int]:
        tokens = proposal.tokens.tolist()
        kids = children_of(parents_of(proposal))
        path, at, pos = [], -1, start
        while pos < len(answer):
            nxt = next((c for c in kids[at + 1] if tokens[c] == answer[pos]), None)
            if nxt is None:
                break
            path.append(nxt)
            at, pos = nxt, pos + 1
        return path

    return walk


def parents_of(proposal: Proposal) -> list[int]:
    return list(proposal.parents) if proposal.parents is not None else list(range(-1, len(proposal) - 1))


def shown(proposal: Proposal, path: list[int]) -> int:
    """How many nodes the round's event shows (the accepted path, then first children below it),
    which is what the engine tells the policy was drafted: a chain's every token."""
    kids, n, at = children_of(parents_of(proposal)), len(path), path[-1] if path else -1
    while kids[at + 1]:
        at, n = kids[at + 1][0], n + 1
    return n


def replay(
    text: Text,
    drafter: Drafter,
    length: DraftLength,
    verdict: Verdict,
    *,
    after_round: Callable[[Round], None] | None = None,
) -> list[Round]:
    """The rounds a run of `drafter` under `length` makes on the text, the prefill's first
    token not among them. `after_round` hears each round as it ends (the clock's price)."""
    ids, p = torch.tensor(text.ids, dtype=torch.long), len(text.prompt_ids)
    new, rounds = 1, []
    if text.answer_ids[0] in text.eos:
        return rounds
    drafter.begin(ids[: p + 1])
    while new < text.max_new_tokens and new < text.n:
        remaining = text.max_new_tokens - new
        context = ids[: p + new]  # the text so far: under sampling too, the replay reads on along the text
        limit = length.limit(drafter.unread(p + new), remaining)
        proposal = drafter.propose(context, min(limit, remaining - 1), length.keep_going, length)
        path = verdict(proposal, new)
        drafter.accepted_path(path)
        out = text.answer_ids[new : new + len(path) + 1]
        kept = _kept(out, text.eos, remaining)
        length.update(shown(proposal, path), len(path), setup_ms=proposal.setup_ms)
        r = Round(
            start=new,
            drafted=len(proposal),
            accepted=min(len(path), kept),
            tokens=kept,
            passes=proposal.passes,
            ride=0 if proposal.ride is None else proposal.ride.numel(),
            tree=proposal.parents is not None or proposal.ride is not None,
            setup_ms=proposal.setup_ms,
            draft_ms=proposal.ms,
        )
        rounds.append(r)
        if after_round:
            after_round(r)
        new += kept
        if any(t in text.eos for t in out[:kept]):
            break
    return rounds


def _kept(new: list[int], eos: frozenset[int], remaining: int) -> int:
    """How many of a round's new tokens join the output: up to a stop token, within the limit."""
    for j, t in enumerate(new):
        if t in eos:
            return j + 1
    return min(len(new), remaining)
