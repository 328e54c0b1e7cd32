"""The cost-aware policy of the draft-free drafters (suffix, lookahead, prompt lookup): a tree
(a chain is a tree one node wide) only as large as its expected accepted tokens pay for.

A round verifying n candidate nodes beside r ride nodes costs V(1 + r + n) (the measured
pass-cost curve, `cost_model.CostModel`) and gives 1 + sum of the nodes' chances of
acceptance in expectation (each chance the probability that the node lies on the accepted
path). `tree_nodes` keeps the best-first prefix with the most expected tokens per ms; n = 0
is plain decoding. The drafter states the chances and learns them from the target's
verdicts, so a method whose guesses stop landing stops speculating, and its chances recover
toward their prior while it waits, so it can start again.
"""

from __future__ import annotations

from typing import Sequence

from specviz.cost_model import CostModel
from specviz.drafters.cost_aware import REALISED_MARGIN
from specviz.drafters.length import DraftLength
from specviz.choices import COST_AWARE


class TreeCost(DraftLength):
    name = COST_AWARE

    def __init__(self, cost: CostModel, k_max: int):
        super().__init__(k_max)
        self._cost = cost

    def tree_nodes(self, chances: Sequence[float], ride: int = 0) -> int:
        v = self._cost.verify_ms
        best_n, best_rate, tokens = 0, 1.0 / v(1 + ride), 1.0
        for n, chance in enumerate(chances, 1):
            tokens += max(0.0, min(1.0, float(chance)))
            rate = tokens / v(1 + ride + n)
            if rate > best_rate:
                best_n, best_rate = n, rate
        return best_n

    def pays(self, tokens: float, nodes: int) -> bool:
        v = self._cost.verify_ms
        return tokens / v(1 + nodes) >= REALISED_MARGIN / v(1)  # a measured yield, as the chain policy judges it
