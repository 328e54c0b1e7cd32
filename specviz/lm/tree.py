"""Tree attention: one forward pass over a tree of tokens, then keep one path of it cached.

A tree is a list of nodes (a token each) with parent indices; parents come before their
children and parent -1 marks a node that follows the context directly. In one pass every
node attends to the whole cached context, to its ancestors and to itself, never to a
sibling or a cousin, and sits at position `context + depth` (depth 0 for parent -1), so
each node's logits are exactly those a chain through its ancestors would give.

    tree = TreeLM(lm)                      # lm (`lm.lean.model_lm`) holds the context
    logits = tree.feed(tokens, parents)    # (n, V): one row per node
    tree.keep_path([0, 2, 5])              # the cache now holds context + that path

The target's verify pass feeds the last committed token as node 0 (parent -1) and the
drafted nodes beneath it, as the chain round feeds [last token, x_1..x_k]; a drafter feeds
one level of its tree per pass, each level's nodes seeing the levels fed before.

The loop under it does the pass (`feed_tree`: a boolean mask and explicit positions) and
moves rows (`keep_rows`): the lean loop in its own buffers, transformers' forward in a
`DynamicCache` (`lm.cached`). After verification the accepted nodes' key/value rows are
copied into place right after the context and the rest is cropped, which leaves the cache
exactly as a chain pass over the accepted tokens would have.
"""

from __future__ import annotations

from typing import Sequence

import torch

from specviz.lm.lean import ModelLM


def depths(parents: Sequence[int]) -> list[int]:
    """Depth of each node: 0 for parent -1, one more than its parent otherwise."""
    check_parents(parents)
    out: list[int] = []
    for p in parents:
        out.append(0 if p < 0 else out[p] + 1)
    return out


def check_parents(parents: Sequence[int]) -> None:
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"node {i} has parent {p}: a parent must be -1 or an earlier node")


def ancestry(parents: Sequence[int]) -> torch.Tensor:
    """(n, n) bool: [i, j] is True where node j is node i or one of its ancestors."""
    check_parents(parents)
    n = len(parents)
    seen = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            seen[i] |= seen[p]
    return seen


class TreeLM:
    """The tree part of a model's cache: the nodes fed since it was made, after the context.

    The context is what `lm` holds when the TreeLM is made; nodes are numbered in the order
    they are fed, across calls to `feed`.
    """

    def __init__(self, lm: ModelLM):
        self.lm = lm
        self.context_len = lm.length
        self.parents: list[int] = []
        self.depths: list[int] = []

    def __len__(self) -> int:
        return len(self.parents)

    def allowed(self, parents: Sequence[int]) -> torch.Tensor:
        """(n, past + n) bool: what each of the new nodes may attend to, past being the
        context and the nodes fed before (parents index into all nodes, old and new)."""
        old = len(self.parents)
        seen = ancestry(self.parents + list(parents))[old:]
        context = torch.ones(len(parents), self.context_len, dtype=torch.bool)
        return torch.cat([context, seen], dim=1)

    def feed(self, tokens: torch.Tensor, parents: Sequence[int]) -> torch.Tensor:
        """Run the model once over new nodes; logits (n, V), row i after node i.

        tokens: (n,) ids; parents: n indices into all nodes fed so far plus these (-1: the
        node follows the context).
        """
        parents = list(parents)
        if tokens.numel() != len(parents):
            raise ValueError(f"{tokens.numel()} tokens but {len(parents)} parents")
        if self.lm.length != self.context_len + len(self.parents):
            raise RuntimeError("the cache changed outside this tree since it was made")
        allowed = self.allowed(parents)
        all_depths = depths(self.parents + parents)
        new_depths = all_depths[len(self.parents) :]
        positions = torch.tensor(new_depths, dtype=torch.long) + self.context_len
        logits = self.lm.feed_tree(tokens, allowed, positions)
        self.parents += parents
        self.depths = all_depths
        return logits

    def keep_path(self, path: Sequence[int]) -> None:
        """Keep the context and the nodes of `path` (a chain from a child of the context down,
        node indices in order); drop every other node from the cache."""
        path = list(path)
        for j, node in enumerate(path):
            if not 0 <= node < len(self.parents):
                raise ValueError(f"node {node} was not fed")
            if self.parents[node] != (path[j - 1] if j else -1):
                raise ValueError(f"{path} is not a path from the context: node {node}'s parent is {self.parents[node]}")
        self.lm.keep_rows(self.context_len, path)
        self.parents = [j - 1 for j in range(len(path))]
        self.depths = list(range(len(path)))

