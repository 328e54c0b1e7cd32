"""What both torch loops share (`lean.LeanLM`, `cached.CachedLM`): a feed in chunks; a tree
pass under a mask, and its path kept by moving rows (`lm.tree`)."""

from __future__ import annotations

import torch

from specviz.choices import TORCH
from specviz.lm.interrupt import feed_in_chunks
from specviz.lm.tree import OpenTrees, ancestry


class TorchLM(OpenTrees):
    """A loop's own `_pass(ids, keep, allowed=None, positions=None)` (one pass over `ids` after
    the cached tokens, logits of the last `keep` positions; a chain, or with `allowed` (n,
    length + n) bool and `positions` (n,) on its device, node i attending where `allowed[i]` is
    True at position `positions[i]`) and `_move_rows(src, start)` (cache rows `src` copied to
    `start` on) make it an LM."""

    runtime = TORCH

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """A long prompt goes in chunks, the run's stop check between them (`lm.interrupt`)."""
        return feed_in_chunks(self._pass, ids, keep)

    def _feed_nodes(self, tree, tokens: torch.Tensor, parents: list[int], positions: list[int]) -> torch.Tensor:
        seen = ancestry(parents)[len(tree) :]
        context = torch.ones(len(seen), tree.context_len, dtype=torch.bool)
        allowed = torch.cat([context, seen], dim=1).to(self.device)
        return self._pass(tokens, 0, allowed, torch.tensor(positions, dtype=torch.long, device=self.device))

    def keep_path(self, path) -> None:
        """The path's rows move to just after the context, then the cache is cropped there."""
        tree, path = self.close_tree(path)
        if path != list(range(len(path))):  # already in place otherwise
            self._move_rows(torch.tensor(path, dtype=torch.long) + tree.context_len, tree.context_len)
        self.crop(tree.context_len + len(path))
