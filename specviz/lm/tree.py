"""Token trees: one pass over many branches, then keep one path of them cached.

A tree is a list of nodes (a token each) with parent indices; parents come before their
children and parent -1 marks a node that follows the context directly. In one pass every
node attends to the whole cached context, to its ancestors and to itself, never to a
sibling or a cousin, and sits at position `context + depth` (depth 0 for parent -1), so
each node's logits are exactly those a chain through its ancestors would give.

Every runtime (`lm.runtime.LM`) takes a tree the same way, as tokens with their parents:

    logits = lm.feed_tree(tokens, parents)   # (n, V): one row per node; opens a tree at lm.length
    more = lm.feed_tree(tokens2, parents2)   # the next level: parents index into every node so far
    lm.keep_path([0, 2, 5])                  # the cache now holds context + that path

The target's verify pass feeds the last committed token as node 0 (parent -1) and the
drafted nodes beneath it, as the chain round feeds [last token, x_1..x_k]; a drafter feeds
one level of its tree per pass, each level's nodes seeing the levels fed before.

`OpenTrees` is the bookkeeping both runtimes share: the nodes fed so far, their parents
checked and their positions worked out once. The torch loops run a tree under a boolean mask
(`ancestry`) at explicit positions, then copy the accepted rows into place right after the
context, which leaves the cache exactly as a chain pass over the accepted tokens would have
(`lm.torch_runtime.base`). llama.cpp expresses the same tree as sequence membership instead
(`lm.llamacpp_runtime.lm`).
"""

from __future__ import annotations

from typing import Sequence

import torch


def chain_parents(n: int) -> list[int]:
    """A chain of n nodes as a tree: each node the child of the one before, the first of the root."""
    return list(range(-1, n - 1))


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


def check_path(parents: Sequence[int], path: Sequence[int]) -> list[int]:
    """`path` as a list, if it is a chain of the tree's nodes (given by `parents`) from a child
    of the root down."""
    path = list(path)
    for j, node in enumerate(path):
        if not 0 <= node < len(parents):
            raise ValueError(f"{path} is not a path of the tree: it has no node {node} ({len(parents)} nodes)")
        if parents[node] != (path[j - 1] if j else -1):
            raise ValueError(f"{path} is not a path from the root: node {node}'s parent is {parents[node]}")
    return path


def ancestry(parents: Sequence[int]) -> torch.Tensor:
    """(n, n) bool: [i, j] is True where node j is node i or one of its ancestors."""
    check_parents(parents)
    n = len(parents)
    seen = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            seen[i] |= seen[p]
    return seen


class OpenTree:
    """The nodes fed since a tree was opened at `context_len` cached tokens."""

    def __init__(self, context_len: int):
        self.context_len = context_len
        self.parents: list[int] = []

    def __len__(self) -> int:
        return len(self.parents)


class OpenTrees:
    """An LM's open tree: opened at its `length` by the first `feed_tree`, closed by
    `keep_path` (`close_tree`); its `crop` and `reset` close it too. A runtime runs the new
    nodes in `_feed_nodes(tree, tokens, parents, positions)`: `parents` of every node so far,
    the new ones after the tree's `len(tree)`, each at its position in `positions`."""

    _tree: OpenTree | None = None

    def feed_tree(self, tokens: torch.Tensor, parents: Sequence[int]) -> torch.Tensor:
        tree = self.open_tree()
        every = tree.parents + list(parents)
        if tokens.numel() != len(every) - len(tree):
            raise ValueError(f"{tokens.numel()} tokens but {len(every) - len(tree)} parents")
        positions = [tree.context_len + d for d in depths(every)[len(tree) :]]
        logits = self._feed_nodes(tree, tokens, every, positions)
        tree.parents = every
        return logits

    def open_tree(self) -> OpenTree:
        if self._tree is None:
            self._tree = OpenTree(self.length)
        elif self.length != self._tree.context_len + len(self._tree):
            raise RuntimeError("the cache changed outside the open tree since it was opened")
        return self._tree

    def close_tree(self, path: Sequence[int]) -> tuple[OpenTree, list[int]]:
        """The open tree, now closed, and `path` as a list once checked against it."""
        if self._tree is None:
            raise RuntimeError("no tree is open")
        path = check_path(self._tree.parents, path)
        tree, self._tree = self._tree, None
        return tree, path
