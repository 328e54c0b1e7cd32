"""The draft model's tree (`drafters.tree`), bounded from the draft's teacher-forced pass.

Under greedy decoding a tree round starting at position i accepts the path of the text's tokens
as deep as that path is in the tree. The tree keeps the `nodes` best candidates of the draft's
top-`width` tree by path probability, so the text's node at depth d is kept when

- its token is among the `width` likeliest after the text before it (known from the pass), and
- fewer than `nodes` candidates score above it: the path above it and the path's siblings,
  whose scores the pass knows, and the descendants of siblings that score above it, which
  follow the draft's own off-text guesses and are not known.

Counting no such descendants gives an upper bound of the accepted length; counting as many as
their scores allow (at most floor(sibling's score / the node's score) a level, and at most
width^level) gives a lower bound. Where the bounds meet (a confident draft's path, a sure
miss) the figure is exact; elsewhere the tournament shows both. The node count each round
verifies is the full budget (the top-`width` tree within k levels, at most `nodes`), and a
level's expansion one draft pass.
"""

from __future__ import annotations

import numpy as np
import torch

from specviz.drafters.base import KeepGoing, Proposal, TreeBudget, TreeDrafting
from specviz.workshop.tournament.chains import OFF_TEXT
from specviz.workshop.tournament.passes import DraftRows
from specviz.workshop.tournament.text import Text


def path_bounds(draft: DraftRows, answer: list[int], start: int, k: int, nodes: int, width: int) -> tuple[int, int]:
    """(lower, upper) bounds of the text path's depth in the tree of a round starting at `start`."""
    lower = upper = 0
    sure, maybe = True, True
    score, siblings = 1.0, []  # siblings: (score, level) of the path's off-text siblings so far
    for d in range(1, min(k, len(answer) - start) + 1):
        pos = start + d - 1
        ids, probs = draft.top_ids[pos, :width], draft.top_p[pos, :width]
        hit = np.flatnonzero(ids == answer[pos])
        if not hit.size or draft.text_p[pos] <= 0:
            break
        rank, parent_score = int(hit[0]), score
        score = parent_score * float(draft.text_p[pos])
        siblings += [(parent_score * float(p), d, r < rank) for r, p in enumerate(probs) if r != rank and p > 0]
        known = (d - 1) + sum(s > score or (lvl == d and before) for s, lvl, before in siblings)
        unknown = sum(_descendants(s, score, k - lvl, width) for s, lvl, _ in siblings if s > score)
        maybe = maybe and known < nodes
        sure = sure and known + unknown < nodes
        upper += maybe
        lower += sure
        if not maybe:
            break
    return lower, upper


def _descendants(sibling: float, score: float, levels: int, width: int) -> int:
    """The most descendants, over `levels` levels, of a node scoring `sibling` that can score above `score`."""
    per_level = int(sibling / score)
    return sum(min(width**lvl, per_level) for lvl in range(1, levels + 1))


def tree_size(k: int, nodes: int, width: int) -> int:
    """The nodes a round verifies: the budget, or the whole top-`width` tree within k levels if smaller."""
    return min(nodes, sum(width**lvl for lvl in range(1, k + 1)))


class BoundedTree(TreeDrafting):
    """The tree drafter's rounds at one bound (`lower` or not): the text's path as deep as the
    bound says, the rest of the budget as nodes off the text."""

    def __init__(self, name: str, text: Text, draft: DraftRows, nodes: int, width: int, *, lower: bool):
        self.name, self._text, self._draft = name, text, draft
        self._nodes, self._width, self._lower = nodes, width, lower

    def begin(self, prompt_ids: torch.Tensor) -> None:
        pass

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        if k <= 0:
            return Proposal.empty(context, parents=[])
        start = context.numel() - len(self._text.prompt_ids)
        low, high = path_bounds(self._draft, self._text.answer_ids, start, k, self._nodes, self._width)
        depth = low if self._lower else high
        size = max(tree_size(k, self._nodes, self._width), depth)
        tokens = self._text.answer_ids[start : start + depth] + [OFF_TEXT] * (size - depth)
        parents = list(range(-1, depth - 1)) + [-1] * (size - depth)
        return Proposal(
            tokens=torch.tensor(tokens, dtype=torch.long), q=None, passes=min(k, self._nodes), parents=parents
        )

    def accepted_path(self, path: list[int]) -> None:
        pass
