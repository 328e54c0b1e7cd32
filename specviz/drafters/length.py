"""How many tokens to draft each round: the policy interface, a fixed k, and transformers'
heuristic schedule. The cost-aware policy is in `cost_aware.py`; `make_length` in this
package's `__init__` is the one place a policy is chosen.

A policy answers three questions: how many tokens at most this round (`limit`, told the
tokens an output format forces at the round's start, which cost no drafting), whether to
keep drafting after a token the draft was this confident about (`keep_going`), and what
to learn from a finished round (`update`: how many were drafted and accepted, the ms the
run pays once, and the ms of the round's target pass). For the
draft-free tree drafters (suffix, lookahead) it also sizes a tree (`tree_nodes`) and says
whether a measured yield pays for its pass (`pays`): `drafters.base.TreeBudget`.
"""

from __future__ import annotations

from typing import Sequence
from specviz.choices import FIXED, HEURISTIC
from specviz.cost_model import CostModel


class DraftLength:
    """A fixed k (policy "fixed")."""

    name = FIXED
    why = ""  # why this round drafts nothing, or only to check (`events.POLICY_NOTES`)

    def __init__(self, k: int):
        self.k = k

    def limit(self, unread: int = 0, remaining: int | None = None, forced: int = 0) -> int:
        """The most tokens this round may draft, the drafter having `unread` context tokens
        still to read (`Drafter.unread`), the run `remaining` tokens still to make and the
        output format forcing `forced` tokens where the round starts (they ride in its pass)."""
        return self.k

    def keep_going(self, confidence: float) -> bool:
        return True

    def update(self, drafted: int, accepted: int, *, setup_ms: float = 0.0, target_ms: float | None = None) -> None:
        pass

    def priced(self) -> CostModel | None:
        """The costs the policy priced its last round on, where it prices rounds."""
        return None

    def tree_nodes(self, chances: Sequence[float], ride: int = 0) -> int:
        """How many of a tree's candidate nodes (their chances of acceptance, best first) a
        round verifies, beside `ride` nodes that share the pass: here all of them (the
        drafter's own size settings bound the tree)."""
        return len(chances)

    def pays(self, tokens: float, nodes: int) -> bool:
        """Whether rounds giving `tokens` tokens each from a pass over `nodes` new nodes beat
        plain decoding: a fixed policy never asks."""
        return True


class HeuristicLength(DraftLength):
    """transformers' assisted-generation schedule (policy "heuristic"): stop a round's
    drafting once the draft's top probability falls below `threshold`, and move k with
    recent acceptance: +2 after a round where every draft was accepted, -1 after one with a
    rejection (between 1 and `k_max`). Kept so it can be compared with the cost-aware policy."""

    name = HEURISTIC

    def __init__(self, k_max: int, threshold: float = 0.4, start: int | None = None):
        super().__init__(start or k_max)
        self.k_max = k_max
        self.threshold = threshold

    def keep_going(self, confidence: float) -> bool:
        return confidence >= self.threshold

    def update(self, drafted: int, accepted: int, *, setup_ms: float = 0.0, target_ms: float | None = None) -> None:
        if drafted == 0:
            return
        self.k = min(self.k_max, self.k + 2) if accepted == drafted else max(1, self.k - 1)


def fixed(pair, settings, drafter) -> DraftLength:
    return DraftLength(settings.k)


def heuristic(pair, settings, drafter) -> HeuristicLength:
    return HeuristicLength(settings.k, threshold=settings.adaptive_threshold)
