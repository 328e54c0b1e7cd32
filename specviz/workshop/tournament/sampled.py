"""Verdicts under sampling: each node accepted with the chance the acceptance rule gives it.

A chain token drawn from the draft's q at position i, on the context the text gives, is
accepted with probability beta_i = sum_x min(p_i(x), q_i(x)) (DESIGN's overlap), whatever token
the draw gives; a copied token x (a point mass) with p_i(x), and after a sibling y was rejected
with p_i(x) / (1 - p_i(y) - ...), as the point-mass rule removes y and renormalises.

Along a real sampled run's own text these chances are exact: the context of a tested position
is the text, the accepted drafts being the text's tokens. A replay draws verdicts from them
(`SampledVerdict`, seeded) and averages a few replays; a round's later positions then read the
text's context where a real round would have its own accepted draws, so beyond a run's own
text the figures are estimates.
"""

from __future__ import annotations

import numpy as np

from specviz.drafters.base import Proposal
from specviz.engine.verify import children_of
from specviz.workshop.tournament.passes import TargetRows
from specviz.workshop.tournament.replay import parents_of

SAMPLED_REPLAYS = 4  # replays averaged per drafter and policy under sampling


class SampledVerdict:
    def __init__(self, target: TargetRows, n: int, overlap: np.ndarray | None, seed: int):
        self._target, self._n, self._overlap = target, n, overlap
        self._rng = np.random.default_rng(seed)

    def __call__(self, proposal: Proposal, start: int) -> list[int]:
        tokens = proposal.tokens.tolist()
        kids = children_of(parents_of(proposal))
        path, at, pos = [], -1, start
        while pos < self._n and kids[at + 1]:
            nxt = self._choose(kids[at + 1], tokens, pos)
            if nxt is None:
                break
            path.append(nxt)
            at, pos = nxt, pos + 1
        return path

    def _choose(self, children: list[int], tokens: list[int], pos: int) -> int | None:
        if self._overlap is not None:  # a draft model's chain: one child, drawn from q
            return children[0] if self._rng.random() < self._overlap[pos] else None
        left = 1.0
        for c in children:
            p = self._target.p_of(pos, tokens[c])
            if left > 0 and self._rng.random() < p / left:
                return c
            left -= p
        return None
