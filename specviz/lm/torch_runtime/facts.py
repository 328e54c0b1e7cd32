"""The `lm.runtime.LM` facts of a torch model, read from its config."""

from __future__ import annotations

from specviz.choices import RUNTIMES, TORCH
from specviz.choices import TREE_PASS as TREE


class TorchFacts:
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
