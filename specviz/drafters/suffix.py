"""Suffix decoding: a speculation tree from what followed the context's longest earlier match.

No second model (SuffixDecoding; vLLM's `suffix` method). The corpus is the request's own
text (the prompt, earlier turns included, and the output so far) plus, where a page session
exists, that session's earlier outputs. Each round:

1. find the longest suffix of the context (up to MAX_MATCH tokens) that occurs earlier in
   the corpus, every occurrence of it;
2. gather what followed each occurrence into a trie, each node counting the occurrences
   that continued that way; a node's score is its count over the occurrences (how often this
   continuation followed before);
3. grow the speculation tree best first by score, down to `min_score` and up to `max_nodes`
   nodes, k deep, then keep as many nodes as the policy's budget says pay (`tree_cost`).

Siblings are distinct tokens chosen deterministically, so the tree is verified with the
point-mass tree rule (`engine.verify.verify_tree`, as point masses) and the output stays the
target's.

A node's chance of acceptance, for the policy's budget, is the product down its path of
(the share of its parent's occurrences that continued through it) x the chance that the
target accepts a copied node behind a span of its length, learnt from the run's own copied
spans (`copy_span.CopyEvidence`: long inside a copy, short outside it, back as soon as a
match resumes the copy where it broke off, or at once on the guess that the answer replaced
one of the copy's tokens).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from specviz.drafters.base import KeepGoing, Proposal, SourceNote, TreeBudget, TreeDrafting, point_masses, trie
from specviz.drafters.copy_span import RESUMED, RESUMED_BONUS, SKIPPED, CopyEvidence, sizing_note
from specviz.drafters.tree_cost import TreeCost
from specviz.choices import SUFFIX
from specviz.lm.tree import chain_parents

MAX_MATCH = 32  # the longest context suffix looked up
# Inside a copy (a match this long, or one that resumes a broken-off copy) the round verifies the
# likeliest continuation as a chain: a sibling there adds little and turns the pass into a tree
# pass, which on llama.cpp costs more than the chain pass V(n) prices.
CHAIN_SPAN = 8


@dataclass
class Match:
    """The context's longest earlier match: its length and where each occurrence ends."""

    length: int
    ends: list[tuple[int, int]] = field(default_factory=list)  # (document, index of its last token)


@dataclass
class SuffixTree:
    """A speculation tree, best-first: parents before children, siblings best first."""

    tokens: list[int]
    parents: list[int]
    counts: list[int]  # occurrences that continued through each node
    occurrences: int = 0  # of the matched suffix
    sources: list[tuple[int, int]] = field(default_factory=list)  # where each node was first read


class SuffixDrafter(TreeDrafting):
    name = SUFFIX

    def __init__(self, max_nodes: int = 16, min_score: float = 0.1, history: Sequence[Sequence[int]] = ()):
        self.max_nodes = max_nodes
        self.min_score = min_score
        # Earlier outputs (a page session's): read-only, copied so a caller's list cannot change the run.
        self._history = [np.asarray(list(d), dtype=np.int64) for d in history if len(d) > 1]
        self.begin(torch.zeros(0, dtype=torch.long))

    def begin(self, prompt_ids: torch.Tensor) -> None:
        self.evidence = CopyEvidence()

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        ctx = context.detach().cpu().numpy().astype(np.int64, copy=False)
        tree, match, span, how = self._tree([*self._history, ctx], ctx, k)
        matched = ctx[len(ctx) - match.length :].tolist() if match.length else []
        source = SourceNote(SUFFIX, matched=matched, occurrences=len(match.ends))
        self.evidence.waited()
        if tree is None or not tree.tokens:
            return point_masses([], [], [], start, source)
        skip = how == SKIPPED
        chances = self.evidence.offer(span, tree.parents, shares(tree), tree.sources, len(ctx), budget, skip=skip)
        n = len(chances)
        if isinstance(budget, TreeCost):
            rate = self.evidence.skip_rate() if skip else self.evidence.rate(span)
            source.note = sizing_note(span, how, rate, n, len(tree.tokens))
        if n:
            source.counts, source.occurrences = tree.counts[:n], tree.occurrences
        return point_masses(tree.tokens[:n], tree.parents[:n], chances, start, source)

    def _tree(self, docs: list[np.ndarray], ctx: np.ndarray, k: int) -> tuple[SuffixTree | None, Match, int, str]:
        """The round's tree, the match behind it, its span and how the copy was found: a match
        that resumes the broken-off copy (read on from there only), the guess that the last
        token replaced one of the copy's, or the longest match."""
        match = longest_match(docs, ctx, MAX_MATCH)
        if k <= 0:
            return None, match, match.length, ""
        resumed = [e for e in match.ends if self.evidence.resumes(e, match.length, len(ctx))]
        if resumed:
            match = Match(match.length, resumed)
            return chain_of(self._grow(docs, match, k)), match, match.length + RESUMED_BONUS, RESUMED
        skip = self.evidence.skip_source(len(ctx))
        if skip is not None and self.evidence.skip_rate() > self.evidence.rate(match.length):
            d, at = skip
            tokens = docs[d][at : at + k].tolist()
            n = len(tokens)
            tree = SuffixTree(tokens, chain_parents(n), [1] * n, 1, [(d, at + i) for i in range(n)])
            return tree, Match(0), RESUMED_BONUS, SKIPPED
        tree = self._grow(docs, match, k)
        return (chain_of(tree) if match.length >= CHAIN_SPAN else tree), match, match.length, ""

    def _grow(self, docs: list[np.ndarray], match: Match, k: int) -> SuffixTree | None:
        return grow(docs, match, depth=k, max_nodes=self.max_nodes, min_score=self.min_score)

    def accepted_path(self, path: list[int]) -> None:
        self.evidence.heard(path)


def shares(tree: SuffixTree) -> list[float]:
    """Per node, the share of its parent's occurrences that continued through it."""
    totals = [tree.counts[par] if par >= 0 else tree.occurrences for par in tree.parents]
    return [c / t for c, t in zip(tree.counts, totals)]


def longest_match(docs: Sequence[np.ndarray], ctx: np.ndarray, max_match: int) -> Match:
    """The longest suffix of `ctx` (at most `max_match` tokens) that occurs in `docs` with a
    token after it (so the context's own end, when `ctx` is one of the docs, never counts)."""
    if len(ctx) == 0:
        return Match(0)
    # Occurrences of the last token that have a successor: candidate ends.
    ends = [np.flatnonzero(doc[:-1] == ctx[-1]) for doc in docs]
    if not any(e.size for e in ends):
        return Match(0)
    length = 1
    while length < min(max_match, len(ctx)):
        tok = ctx[-1 - length]
        longer = [e[(e >= length)] for e in ends]
        longer = [e[doc[e - length] == tok] for e, doc in zip(longer, docs)]
        if not any(e.size for e in longer):
            break
        ends, length = longer, length + 1
    return Match(length, [(d, int(i)) for d, e in enumerate(ends) for i in e])


def grow(
    docs: Sequence[np.ndarray], match: Match, *, depth: int, max_nodes: int, min_score: float
) -> SuffixTree | None:
    """The speculation tree of what followed the match's occurrences, best first by score."""
    if not match.ends:
        return None
    nodes = trie((docs[d][end + 1 : end + 1 + depth].tolist(), (d, end)) for d, end in match.ends)
    children: dict[int, list[int]] = {}
    for node, parent in enumerate(nodes.parents):
        children.setdefault(parent, []).append(node)
    total = len(match.ends)
    out = SuffixTree([], [], [], total)
    index_of = {-1: -1}  # trie node -> index in the tree (-1: the root)
    heap = [(-nodes.counts[c] / total, c, -1) for c in children.get(-1, [])]
    heapq.heapify(heap)
    while heap and len(out.tokens) < max_nodes:
        neg, node, parent = heapq.heappop(heap)
        if -neg < min_score:
            break
        index_of[node] = len(out.tokens)
        out.tokens.append(nodes.tokens[node])
        out.parents.append(index_of[parent])
        out.counts.append(nodes.counts[node])
        d, end = nodes.tags[node]
        out.sources.append((d, end + nodes.depths[node]))  # where the node was first read
        for c in children.get(node, []):
            heapq.heappush(heap, (-nodes.counts[c] / total, c, node))
    return out


def chain_of(tree: SuffixTree | None) -> SuffixTree | None:
    """The tree's first-child path from the root: its likeliest continuation as a chain."""
    if tree is None:
        return None
    keep, at = [], -1
    for i, parent in enumerate(tree.parents):
        if parent == at:
            keep.append(i)
            at = i
    return SuffixTree(
        [tree.tokens[i] for i in keep],
        chain_parents(len(keep)),
        [tree.counts[i] for i in keep],
        tree.occurrences,
        [tree.sources[i] for i in keep],
    )


def make(pair, settings, *, generator=None, history=()) -> SuffixDrafter:
    """`history` (a page session's earlier outputs) joins the request's text in the corpus."""
    return SuffixDrafter(settings.suffix_max_nodes, settings.suffix_min_score, history)
