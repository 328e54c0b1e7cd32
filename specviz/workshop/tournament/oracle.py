"""What each drafter would guess at each position, and the oracles that know the answer.

A drafter's run at position i is how many of the text's tokens from i its first proposal there
would get right: a draft model's consecutive greedy matches (`passes.DraftRows`); a copying
drafter's copy, found as its own code finds it with no learnt state (prompt lookup's latest
n-gram match, suffix decoding's longest match and every occurrence of it, lookahead's n-grams
of the context). The text is coloured by which drafters' runs reach each token.

Two oracles know the answer and pay only for what they verify:

- the best drafter each round: from each position, the round (drafter and accepted length)
  that covers the rest of the text fastest on a cost curve, by dynamic programming;
- the copy oracle: the same with any copy of earlier text (the longest stretch of the answer
  from i found anywhere in the prompt and answer before i), drafted for free. No drafter that
  copies earlier text as it stands can beat it on the same pass costs, so it measures how much
  copying a drafter left; suffix decoding's learnt edits (`drafters/copy_edits.py`) copy with
  the answer's own substitutions made, which the oracle does not, and can pass it on a rename.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from specviz.choices import LOOKAHEAD, LOOKUP, SUFFIX
from specviz.cost_model import CostModel
from specviz.drafters.lookup import continuation_start
from specviz.drafters.suffix import MAX_MATCH, longest_match
from specviz.settings import MAX_K
from specviz.workshop.tournament.text import Text

COPY = "copy"  # the copy oracle's one drafter


def runs_from_matches(matches: np.ndarray) -> np.ndarray:
    """Per position, how many consecutive matches start there."""
    out = np.zeros(len(matches) + 1, dtype=np.int64)
    for i in range(len(matches) - 1, -1, -1):
        out[i] = out[i + 1] + 1 if matches[i] else 0
    return out[:-1]


def _run(ids: np.ndarray, source: int, at: int) -> int:
    """How many tokens from ids[source] agree with those from ids[at], the source staying before `at`."""
    n = 0
    while source + n < at and at + n < len(ids) and ids[source + n] == ids[at + n]:
        n += 1
    return n


def copy_runs(text: Text, kind: str, ngram: int = 3) -> np.ndarray:
    """Per answer position, the run of a copying drafter's first proposal there (`kind`: a
    DRAFTERS name of a copying drafter, or COPY for the oracle's longest copy)."""
    ids = np.asarray(text.ids, dtype=np.int64)
    p = len(text.prompt_ids)
    out = np.zeros(text.n, dtype=np.int64)
    for i in range(1, text.n):
        at = p + i
        out[i] = max((_run(ids, s, at) for s in _sources(ids, at, kind, ngram)), default=0)
    return np.minimum(out, ngram - 1) if kind == LOOKAHEAD else out


def _sources(ids: np.ndarray, at: int, kind: str, ngram: int) -> list[int]:
    context = ids[:at]
    if kind == COPY:
        return np.flatnonzero(context == ids[at]).tolist()
    if kind == LOOKUP:
        start = continuation_start(torch.from_numpy(context))
        return [] if start is None else [start]
    if kind == SUFFIX:
        match = longest_match([context], context, MAX_MATCH)
        return [end + 1 for _, end in match.ends]
    return [j + 1 for j in np.flatnonzero(context[:-1] == context[-1]).tolist()]  # lookahead: the root's n-grams


@dataclass
class Plan:
    ms: float
    rounds: list[tuple[int, str, int]]  # (start, drafter, accepted)


def best_rounds(runs: dict[str, np.ndarray], costs: dict[str, float], cost: CostModel, n: int) -> Plan:
    """The fastest cover of positions 1..n-1 by rounds of any drafter (`costs`: its D), each
    accepting at most its run there, or plain steps."""
    v = [0.0] + [cost.verify_ms(m) for m in range(1, MAX_K + 2)]
    best = np.zeros(n + 1)
    choice: list[tuple[str, int]] = [("", 0)] * (n + 1)
    for i in range(n - 1, 0, -1):
        best[i], choice[i] = v[1] + best[i + 1], ("", 0)
        for name, run in runs.items():
            for a in range(1, min(int(run[i]), MAX_K, n - 1 - i) + 1):
                ms = a * costs[name] + v[a + 1] + best[i + a + 1]
                if ms < best[i]:
                    best[i], choice[i] = ms, (name, a)
    rounds, i = [], 1
    while i < n:
        name, a = choice[i]
        rounds.append((i, name, a))
        i += a + 1
    return Plan(float(best[1]) if n > 1 else 0.0, rounds)
