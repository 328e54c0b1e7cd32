"""Suffix decoding: a speculation tree from what followed the context's longest earlier match.

No second model (SuffixDecoding; vLLM's `suffix` method). The corpus is the request's own
text (the prompt, earlier turns, the output so far) plus a page session's earlier outputs.
Each round finds the longest suffix of the context (up to MAX_MATCH tokens) that occurs earlier
in the corpus, gathers what followed each occurrence into a trie (a node's score: the share of
occurrences that continued through it), grows the tree best first by score (down to
`min_score`, up to `max_nodes` nodes, k deep) and keeps as many nodes as the policy's budget
pays for (`tree_cost`). Siblings are distinct tokens chosen deterministically, so the point-mass
tree rule (`engine.verify.verify_tree`) keeps the output the target's.

A node's chance of acceptance, for that budget, is its path's product of those shares and the
chance that the target accepts a copied token behind a span of its length (`copy_span`: learnt
from the run's verdicts, back as soon as a match resumes a broken-off copy). A copy is read with
the edits the answer already made to that text (`copy_edits`): a rename, once seen, no longer
breaks it at the next place.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from specviz.drafters.base import KeepGoing, Proposal, SourceNote, TreeBudget, TreeDrafting, point_masses, trie
from specviz.drafters.copy_edits import CopyEdits, Key, Reader
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
    edits: list[tuple[int, Key]] = field(default_factory=list)  # (node, key) where a learnt edit begins


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
        self.edits = CopyEdits()
        # The edit a round's copy stands on (replaced, written): learnt once its copy is accepted.
        self._pending_edit: tuple[list[int], list[int]] | None = None

    def propose(
        self, context: torch.Tensor, k: int, keep_going: KeepGoing, budget: TreeBudget | None = None
    ) -> Proposal:
        start = time.perf_counter()
        ctx = context.detach().cpu().numpy().astype(np.int64, copy=False)
        self.edits.offered([])
        self._pending_edit = None
        tree, match, span, how = self._tree([*self._history, ctx], ctx, k)
        matched = ctx[len(ctx) - match.length :].tolist() if match.length else []
        source = SourceNote(SUFFIX, matched=matched, occurrences=len(match.ends))
        self.evidence.waited()
        if tree is None or not tree.tokens:
            return point_masses([], [], [], start, source)
        skip = how == SKIPPED
        chances = self.evidence.offer(span, tree.parents, shares(tree), tree.sources, len(ctx), budget, skip=skip)
        n = len(chances)
        self.edits.offered([(i, tree.parents[i], key) for i, key in tree.edits if i < n])
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
            self._learn_edit(docs, ctx, match)
            return chain_of(self._grow(docs, match, k)), match, match.length + RESUMED_BONUS, RESUMED
        skip = self.evidence.skip_source(len(ctx))
        if skip is not None and self.evidence.skip_rate() > self.evidence.rate(match.length):
            d, at = skip
            # The guess: the context's last token replaced docs[d][at - 1]; right, it is an edit to learn.
            self._pending_edit = (docs[d][at - 1 : at].tolist(), ctx[-1:].tolist())
            tokens, sources, begins = self.edits.read(docs[d], at, k)
            n = len(tokens)
            tree = SuffixTree(tokens, chain_parents(n), [1] * n, 1, [(d, i) for i in sources], begins)
            return tree, Match(0), RESUMED_BONUS, SKIPPED
        tree = self._grow(docs, match, k)
        return (chain_of(tree) if match.length >= CHAIN_SPAN else tree), match, match.length, ""

    def _learn_edit(self, docs: list[np.ndarray], ctx: np.ndarray, match: Match) -> None:
        """A match resumes the copy after the answer wrote its own tokens: what they replaced."""
        broke = self.evidence.broke_off()
        if broke is None:
            return
        (d, at), since = broke
        d_end, end = match.ends[0]
        start, written_end = end - match.length + 1, len(ctx) - match.length
        if d_end == d and start > at and written_end >= since:
            self._pending_edit = (docs[d][at:start].tolist(), ctx[since:written_end].tolist())

    def _grow(self, docs: list[np.ndarray], match: Match, k: int) -> SuffixTree | None:
        read = lambda d, at, depth: self.edits.read(docs[d], at, depth)  # noqa: E731
        return grow(docs, match, read, depth=k, max_nodes=self.max_nodes, min_score=self.min_score)

    def accepted_path(self, path: list[int]) -> None:
        self.evidence.heard(path)
        self.edits.heard(path)
        if self._pending_edit is not None and path:
            self.edits.learn(*self._pending_edit)
        self._pending_edit = None


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
    docs: Sequence[np.ndarray], match: Match, read: Reader, *, depth: int, max_nodes: int, min_score: float
) -> SuffixTree | None:
    """The speculation tree of what followed the match's occurrences, best first by score;
    `read(doc, at, depth)` reads each continuation (`CopyEdits.read`)."""
    if not match.ends:
        return None
    reads = {(d, end): read(d, end + 1, depth) for d, end in match.ends}
    nodes = trie((r[0], occurrence) for occurrence, r in reads.items())
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
        occurrence, at = nodes.tags[node], nodes.depths[node] - 1
        _, sources, begins = reads[occurrence]
        out.sources.append((occurrence[0], sources[at]))  # where the node was first read
        out.edits += [(index_of[node], key) for i, key in begins if i == at]
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
    index = {i: j for j, i in enumerate(keep)}
    return SuffixTree(
        [tree.tokens[i] for i in keep],
        chain_parents(len(keep)),
        [tree.counts[i] for i in keep],
        tree.occurrences,
        [tree.sources[i] for i in keep],
        [(index[i], key) for i, key in tree.edits if i in index],
    )


def make(pair, settings, *, generator=None, history=()) -> SuffixDrafter:
    """`history` (a page session's earlier outputs) joins the request's text in the corpus."""
    return SuffixDrafter(settings.suffix_max_nodes, settings.suffix_min_score, history)
