"""A tree drafter: the draft model grows a tree of guesses where its path probability is highest.

Each round drafts at most `nodes` nodes, at most `width` children per node. The children of
a node are the draft's top-`width` tokens at that node (under the processed distribution
the target's tokens are sampled from; under greedy decoding, the plain softmax), and a
node's score is its path probability, the product of the draft's q along the path from the
root. The tree kept is the `nodes` best-scoring nodes of that top-`width` tree, as
expanding best-first would find them (EAGLE-2's tree, with the draft model for a drafter).
A score never grows down a path, so the best nodes always include their parents.

The growing runs one draft pass per level: every node of the newest level that could still
be among the final `nodes` (fewer than `nodes` known nodes score better) is expanded, all of
them in one tree-masked pass (`lm.tree`) over the draft's cache, which holds the context and
the levels fed before; branches share their ancestors' cached keys and values. Nodes at the
depth limit, end-of-sequence tokens and nodes the length policy's `keep_going` refuses are
not expanded. With width 1 the tree is the chain the chain drafter (`model.py`) proposes
under greedy decoding.

Siblings are listed best first, levels in order, so node i's parent always comes before it.
Because the children are chosen deterministically, the target verifies them as point masses
(`engine.verify.verify_tree`), whatever q the draft gave them.

After the round the drafter must hear which path was accepted: `accepted_path(nodes)`.
It then keeps the context and the fed part of that path in its cache (the path's last node
was usually never fed, as nobody needed its children), and drops every other node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import takewhile
from typing import Callable

import torch

from specviz.drafters.base import KeepGoing, Proposal, Sampling, TreeBudget, TreeDrafting, ms_since, ranked
from specviz.lm.runtime import LM
from specviz.lm.sampling import Sampler
from specviz.lm.timing import sync
from specviz.lm.tree import check_path


@dataclass
class Candidate:
    """A node of the top-`width` tree that the growing has seen."""

    index: int  # in order of creation
    token: int
    parent: int  # index of the parent candidate; -1: a child of the root
    depth: int  # 1 for children of the root
    score: float  # path probability: product of q along the path
    confidence: float  # the draft's top probability at its parent
    row: int  # which expanded distribution it was chosen from (0: the root's)
    rank: int  # 0 for the parent's best child
    path: tuple[int, ...]  # the tokens from the root's first child down to this one


@dataclass
class GrownTree:
    candidates: list[Candidate]  # everything seen, in order of creation
    chosen: list[int]  # candidate indices of the tree's nodes, levels in order, siblings best first
    rows: list[torch.Tensor]  # the distributions of the expanded nodes; rows[0] is the root's
    passes: int  # expansion levels (each one model pass)

    @property
    def parents(self) -> list[int]:
        where = {c: i for i, c in enumerate(self.chosen)}
        return [where.get(self.candidates[c].parent, -1) for c in self.chosen]

    @property
    def tokens(self) -> list[int]:
        return [self.candidates[c].token for c in self.chosen]


# Expand a level: the candidates to expand -> their distributions (one 1-D tensor each).
Expand = Callable[[list[Candidate]], list[torch.Tensor]]


def _key(c: Candidate) -> tuple:
    return (-c.score, c.depth, c.index)  # best first; a parent before its equally scored child


def grow_tree(
    root: torch.Tensor,
    expand: Expand,
    *,
    nodes: int,
    width: int,
    max_depth: int,
    stop: Callable[[Candidate], bool] = lambda c: False,
) -> GrownTree:
    """The `nodes` best nodes of the draft's top-`width` tree, by path probability.

    root: the draft's distribution after the context (1-D). `expand` gives the distribution
    after each candidate it is handed (all of one level at once). Candidates deeper than
    `max_depth` are never made; `stop(c)` true keeps c a leaf. Tokens of probability 0 are
    never children.
    """
    cands: list[Candidate] = []
    rows = [root]
    if nodes <= 0 or max_depth <= 0:
        return GrownTree([], [], rows, 0)
    level = _children(None, 0, rows[0], width, cands)
    passes = 0
    while level:
        best = {c.index for c in sorted(cands, key=_key)[:nodes]}
        todo = [c for c in level if c.index in best and c.depth < max_depth and not stop(c)]
        if not todo:
            break
        dists = expand(todo)
        passes += 1
        level = []
        for c, dist in zip(todo, dists):
            rows.append(dist)
            level += _children(c, len(rows) - 1, dist, width, cands)
    return GrownTree(cands, _level_order(cands, {c.index for c in sorted(cands, key=_key)[:nodes]}), rows, passes)


def _children(
    parent: Candidate | None, row: int, dist: torch.Tensor, width: int, cands: list[Candidate]
) -> list[Candidate]:
    """`parent`'s children (None: the root's): the `width` most likely tokens of `dist`, the
    distribution after it (rows[row]), none of probability 0; appended to `cands`."""
    top = dist.topk(min(width, dist.numel()))
    made = []
    conf = float(dist.max())
    base = parent.score if parent else 1.0
    for rank, (prob, tok) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        if prob <= 0:
            break
        c = Candidate(
            index=len(cands),
            token=tok,
            parent=parent.index if parent else -1,
            depth=parent.depth + 1 if parent else 1,
            score=base * prob,
            confidence=conf,
            row=row,
            rank=rank,
            path=(parent.path if parent else ()) + (tok,),
        )
        cands.append(c)
        made.append(c)
    return made


def _level_order(cands: list[Candidate], chosen: set[int]) -> list[int]:
    """The chosen candidates' indices, levels in order; within a level by the parent's place,
    then best sibling first."""
    order: list[int] = []
    place = {-1: -1}
    for depth in range(1, max((c.depth for c in cands), default=0) + 1):
        here = [c for c in cands if c.depth == depth and c.index in chosen]
        here.sort(key=lambda c: (place[c.parent], c.rank))
        for c in here:
            place[c.index] = len(order)
            order.append(c.index)
    return order


class TreeDrafter(Sampling, TreeDrafting):
    """Drafts a token tree with a draft model; see the module docstring.

    lm: the draft's cached model (`lm.runtime.open_lm`); nodes: the node budget N; width: B.
    """

    def __init__(self, name: str, lm: LM, sampler: Sampler, eos_ids: set[int], *, nodes: int, width: int):
        if nodes < 1 or width < 1:
            raise ValueError(f"a tree needs nodes >= 1 and width >= 1 (got {nodes}, {width})")
        self.name = name
        self.nodes = nodes
        self.width = width
        self._lm = lm
        self._sampler = sampler
        self._eos = eos_ids
        self._tree: int | None = None  # the context length of the open tree
        self._fed: list[int | None] = []  # per proposed node: its index in the tree pass, None if never fed
        self._parents: list[int] = []

    def begin(self, prompt_ids: torch.Tensor) -> None:
        self._lm.reset()
        self._tree = None
        if prompt_ids.numel() > 1:
            self._lm.feed(prompt_ids[:-1])

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        """A tree of at most `nodes` nodes, none deeper than k (so that the round's path plus
        the emitted token stays within k + 1 tokens). `keep_going(confidence)` false for a
        node (its parent's top probability) leaves that node a leaf, as it ends a chain.

        The proposal's `parents` give the tree; q row i is the processed draft distribution at
        node i's parent (siblings share it), None under greedy decoding; `confidence[i]` is
        that distribution's top probability; `passes` counts the root's pass and one per level."""
        start = time.perf_counter()
        if self._tree is not None:  # the last round's path was never reported: keep none of it
            self._lm.crop(self._tree)
        self._tree = None
        self._fed, self._parents = [], []
        if k <= 0:
            return Proposal.empty(context, parents=[])
        if self._lm.length >= context.numel():  # the same context again: re-read its last token
            self._lm.crop(context.numel() - 1)
        pending = context[self._lm.length :]
        root = ranked(self._sampler, self._masked(self._lm.feed(pending)[-1:], [()])[0])
        tree = self._lm.length
        fed: dict[int, int] = {}  # candidate index -> its index in the tree pass

        def expand(batch: list[Candidate]) -> list[torch.Tensor]:
            parents = [fed[c.parent] if c.parent >= 0 else -1 for c in batch]
            for c in batch:
                fed[c.index] = len(fed)
            ids = torch.tensor([c.token for c in batch], dtype=torch.long, device=context.device)
            logits = self._lm.feed_tree(ids, parents)
            return list(ranked(self._sampler, self._masked(logits, [c.path for c in batch])))

        grown = grow_tree(
            root,
            expand,
            nodes=self.nodes,
            width=self.width,
            max_depth=k,
            stop=lambda c: c.token in self._eos or not keep_going(c.confidence),
        )
        chosen = [grown.candidates[i] for i in grown.chosen]
        tokens = torch.tensor([c.token for c in chosen], dtype=torch.long, device=context.device)
        q = None if self._sampler.greedy else torch.stack([grown.rows[c.row] for c in chosen])
        self._tree = tree
        self._fed = [fed.get(c.index) for c in chosen]
        self._parents = grown.parents
        sync(tokens)
        return Proposal(
            tokens=tokens,
            q=q,
            ms=ms_since(start),
            passes=1 + grown.passes,
            confidence=[c.confidence for c in chosen],
            parents=grown.parents,
        )

    def _masked(self, logits: torch.Tensor, paths: list[tuple[int, ...]]) -> torch.Tensor:
        """Rows of logits after the root's child paths `paths`, under the run's grammar if any."""
        grammar, logits = self._sampler.grammar, self._sampler.logits(logits)
        return logits if grammar is None else self._sampler.masked(logits, grammar.rows(paths))

    def accepted_path(self, node_indices: list[int]) -> None:
        """The target accepted these nodes of the last proposal (a path from a child of the
        root down, indices into its tokens). The draft's cache keeps the context and the
        part of that path it has fed; the rest of the path and the round's emitted token
        are fed at the start of the next round."""
        path = check_path(self._parents, node_indices)
        if self._tree is None:
            return
        # A node never fed has no fed descendants.
        rows = list(takewhile(lambda row: row is not None, (self._fed[node] for node in path)))
        if any(f is not None for f in self._fed):  # a tree pass was made: keep its path
            self._lm.keep_path(rows)
        else:
            self._lm.crop(self._tree)
        self._tree = None

    def unread(self, context_len: int) -> int:
        return context_len - self._lm.length


def make(pair, settings, *, generator=None, history=()) -> "TreeDrafter":
    """The draft model's tree of `settings.tree_nodes` nodes, `tree_width` children at most."""
    from specviz.errors import UserError
    from specviz.lm.prompt import stop_ids
    from specviz.lm.runtime import open_lm

    if pair.cross_tokenizer:
        raise UserError("the tree drafter needs a draft that shares the target's tokenizer; this pair's does not")
    return TreeDrafter(
        f"tree-{settings.tree_nodes}x{settings.tree_width}",
        open_lm(pair.draft, pair.device),
        Sampler(settings, pair.vocab_size),
        stop_ids(pair),
        nodes=settings.tree_nodes,
        width=settings.tree_width,
    )
