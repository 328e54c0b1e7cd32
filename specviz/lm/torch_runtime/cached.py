"""A causal LM with its own KV cache: feed new tokens, crop back to an accepted prefix.

Both the target and a draft model keep their cache across rounds; after verification the
cache is cropped to the accepted prefix instead of re-encoding the whole context.

This one runs transformers' forward over a `DynamicCache`. A tree pass (`lm.tree`) goes in
as transformers takes it: an already-4D attention mask reaches the attention layers
unchanged (its mask helpers return it as is), so the tree mask is a float additive mask of
shape (1, 1, n, past + n), 0 where a node may look and the dtype's lowest value elsewhere,
with explicit position ids.
"""

from __future__ import annotations

from typing import Callable

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from specviz.lm.torch_runtime.base import TorchLM
from specviz.lm.torch_runtime.keep import logits_to_keep

# (input_ids (1, n), cache, logits_to_keep) -> logits (1, n_kept, V)
Forward = Callable[[torch.Tensor, DynamicCache, int], torch.Tensor]
# (input_ids (1, n), cache, allowed (n, past + n) bool, position_ids (1, n)) -> logits (n, V)
TreeForward = Callable[[torch.Tensor, DynamicCache, torch.Tensor, torch.Tensor], torch.Tensor]


def model_forward(model: torch.nn.Module) -> Forward:
    def forward(ids: torch.Tensor, cache: DynamicCache, keep: int) -> torch.Tensor:
        return model(
            input_ids=ids, cache=cache, use_cache=True, logits_to_keep=logits_to_keep(ids.shape[1], keep, ids.device)
        ).logits

    return forward


def float_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(n, m) bool -> (1, 1, n, m) additive mask: 0 where allowed, the dtype's lowest value elsewhere."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def model_tree_forward(model: torch.nn.Module) -> TreeForward:
    """A TreeForward through a transformers causal LM (a 4D mask and position ids go in as is)."""

    def forward(ids: torch.Tensor, cache: DynamicCache, allowed: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        mask = float_mask(allowed.to(ids.device), model.dtype)
        out = model(
            input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=0
        )
        return out.logits[0]

    return forward


def cached_lm(model: torch.nn.Module, device: torch.device) -> CachedLM:
    """`model` through transformers' forward, chain and tree passes alike."""
    return CachedLM(model_forward(model), model.config, device, tree_forward=model_tree_forward(model))


class CachedLM(TorchLM):
    """Holds the KV cache of one model for one run; `length` tokens are in it. Without a
    `tree_forward` (a forward that is not a whole model's, as early exit's) it has no tree pass."""

    loop = "transformers"

    def __init__(self, forward: Forward, config, device: torch.device, *, tree_forward: TreeForward | None = None):
        self._forward = forward
        self._tree_forward = tree_forward
        self._config = config
        self.device = device
        self.cache = DynamicCache(config=config)
        self.length = 0
        self.vocab_size = int(config.vocab_size)

    def reset(self) -> None:
        self.cache = DynamicCache(config=self._config)
        self.length = 0
        self._tree = None

    def _pass(
        self, ids: torch.Tensor, keep: int, allowed: torch.Tensor | None = None, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        if allowed is None:
            logits = self._forward(ids.to(self.device)[None], self.cache, keep)[0]
        elif self._tree_forward is None:
            raise TypeError("this cached model has no tree pass")  # early exit drafts chains only
        else:
            logits = self._tree_forward(ids.to(self.device)[None], self.cache, allowed, positions[None])
        self.length += ids.numel()
        return logits

    def _move_rows(self, src: torch.Tensor, start: int) -> None:
        for layer in self.cache.layers:
            if type(layer) is not DynamicLayer:
                raise TypeError(f"keeping a tree path needs full-attention cache layers, not {type(layer).__name__}")
            index = src.to(layer.keys.device)
            for name in ("keys", "values"):
                t = getattr(layer, name)
                t[..., start : start + len(src), :] = t.index_select(-2, index)

    def crop(self, length: int) -> None:
        self._tree = None
        if length < self.length:
            self.cache.crop(length - self.length)  # a negative count: tokens to remove
            self.length = length
