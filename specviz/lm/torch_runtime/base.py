"""What both torch loops share (`lean.LeanLM`, `cached.CachedLM`): the `lm.runtime.LM` facts
of a torch model, read from its config; a feed in chunks; a tree's path kept by moving rows."""

from __future__ import annotations

import torch

from specviz.choices import RUNTIMES, TORCH
from specviz.choices import TREE_PASS as TREE
from specviz.lm.interrupt import feed_in_chunks
from specviz.lm.tree import TreeByMask


class TorchLM(TreeByMask):
    """A loop's own `_pass(ids, keep)` (one pass over a chain, logits of the last `keep`
    positions) and `_move_rows(src, start)` (cache rows `src` copied to `start` on) make it an LM."""

    runtime = TORCH

    def facts_from(self, config, *, generation_config, tree: bool) -> None:
        self.vocab_size = int(config.vocab_size)
        window = getattr(config, "max_position_embeddings", None)
        self.context_window = window if isinstance(window, int) and window > 0 else None
        ids = getattr(generation_config, "eos_token_id", None)
        if ids is None:
            ids = getattr(config, "eos_token_id", None)
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        self.stop_ids = frozenset(int(i) for i in ids if 0 <= int(i) < self.vocab_size)
        caps = RUNTIMES[TORCH].capabilities
        self.capabilities = caps if tree else caps - {TREE}

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Run the model over `ids` (1-D) after the cached tokens; logits of the last `keep`
        positions (0: all), shape (n_kept, V). A long prompt goes in chunks (`lm.interrupt`)."""
        return feed_in_chunks(self._pass, ids, keep)

    def keep_rows(self, start: int, rows: list[int]) -> None:
        """Move the cache rows `start + r` (r in `rows`) to `start + j` and crop the cache to
        `start + len(rows)`."""
        if rows != list(range(len(rows))):  # already in place otherwise
            self._move_rows(torch.tensor(rows, dtype=torch.long) + start, start)
        self.crop(start + len(rows))
