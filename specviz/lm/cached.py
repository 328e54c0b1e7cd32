"""A causal LM with its own KV cache: feed new tokens, crop back to an accepted prefix.

Both the target and a draft model keep their cache across rounds; after verification the
cache is cropped to the accepted prefix instead of re-encoding the whole context.
"""

from __future__ import annotations

from typing import Callable

import torch
from transformers import DynamicCache

from specviz.models.keep import logits_to_keep

# (input_ids (1, n), cache, logits_to_keep) -> logits (1, n_kept, V)
Forward = Callable[[torch.Tensor, DynamicCache, int], torch.Tensor]


def model_forward(model: torch.nn.Module) -> Forward:
    def forward(ids: torch.Tensor, cache: DynamicCache, keep: int) -> torch.Tensor:
        return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=logits_to_keep(ids.shape[1], keep, ids.device)).logits

    return forward


class CachedLM:
    """Holds the KV cache of one model for one run; `length` tokens are in it."""

    def __init__(self, forward: Forward, config, device: torch.device):
        self._forward = forward
        self._config = config
        self.device = device
        self.cache = DynamicCache(config=config)
        self.length = 0

    def reset(self) -> None:
        self.cache = DynamicCache(config=self._config)
        self.length = 0

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Run the model over `ids` (1-D) after the cached tokens; logits of the last `keep`
        positions (0: all), shape (n_kept, V)."""
        logits = self._forward(ids.to(self.device)[None], self.cache, keep)[0]
        self.length += ids.numel()
        return logits

    def crop(self, length: int) -> None:
        """Drop cached tokens beyond `length`."""
        if length < self.length:
            self.cache.crop(length - self.length)  # a negative count: tokens to remove
            self.length = length
