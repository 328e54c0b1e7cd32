"""Self-speculation: the target's own first L layers, then its final norm and LM head.

No second set of weights: the draft is a shallower reading of the target. Its KV cache is
its own (L layers deep). On a model that was not trained for early exit, the first layers'
guess often disagrees with the full model: low acceptance here is a finding, not a bug.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

from specviz.costs.measure import for_pair
from specviz.errors import UserError
from specviz.lm.torch_runtime.keep import last_rows


def default_layers(model: torch.nn.Module) -> int:
    """A quarter of the target's layers (at least one)."""
    return max(1, model.config.num_hidden_layers // 4)


class EarlyExitForward:
    """`forward(ids, cache, keep)` through the first `layers` decoder layers of `model`.

    Mirrors the decoder's own forward (Llama / Qwen2 family layout: embed_tokens, layers,
    norm, rotary_emb, lm_head), stopping after `layers` layers.
    """

    def __init__(self, model: torch.nn.Module, layers: int):
        total = model.config.num_hidden_layers
        if not 1 <= layers <= total:
            raise UserError(f"early-exit layers must be from 1 to {total} for this model (got {layers})")
        decoder = model.get_decoder()
        for part in ("embed_tokens", "layers", "norm", "rotary_emb"):
            if not hasattr(decoder, part):
                raise UserError(f"early exit needs a Llama/Qwen-style decoder; this model has no `{part}`")
        self.layers = layers
        self._model = model
        self._decoder = decoder
        self._head = model.get_output_embeddings()

    def __call__(self, ids: torch.Tensor, cache: DynamicCache, keep: int) -> torch.Tensor:
        config, dec = self._model.config, self._decoder
        hidden = dec.embed_tokens(ids)
        past = cache.get_seq_length()
        position_ids = (torch.arange(ids.shape[1], device=ids.device) + past)[None]
        mask_args = dict(
            config=config, inputs_embeds=hidden, attention_mask=None, cache=cache, position_ids=position_ids
        )
        masks = {"full_attention": create_causal_mask(**mask_args)}
        if "sliding_attention" in getattr(config, "layer_types", []):
            masks["sliding_attention"] = create_sliding_window_causal_mask(**mask_args)
        rope = dec.rotary_emb(hidden, position_ids)
        layer_types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
        for i, layer in enumerate(dec.layers[: self.layers]):
            hidden = layer(
                hidden,
                attention_mask=masks[layer_types[i]],
                position_embeddings=rope,
                position_ids=position_ids,
                cache=cache,
                use_cache=True,
            )
        hidden = dec.norm(last_rows(hidden, keep))
        return self._head(hidden)


def layers_for(pair, settings) -> int:
    """The layers the early-exit drafter uses: the settings' count, or a quarter of the target's."""
    return settings.early_exit_layers or default_layers(pair.target)


def target_share(pair, settings) -> float:
    """The share of a target pass an early-exit draft step runs: L of the target's layers."""
    return layers_for(pair, settings) / pair.target.config.num_hidden_layers


def draft_ms(pair, settings) -> float:
    """What an early-exit draft step costs (its `DRAFTERS` entry's price): its share of a one-token target
    pass."""
    return for_pair(pair).target * target_share(pair, settings)


def make(pair, settings, *, generator=None, history=()):
    from specviz.drafters.model import ModelDrafter
    from specviz.lm.torch_runtime.cached import CachedLM
    from specviz.lm.prompt import stop_ids
    from specviz.lm.sampling import Sampler

    layers = layers_for(pair, settings)
    lm = CachedLM(EarlyExitForward(pair.target, layers), pair.target.config, pair.device)
    return ModelDrafter(
        f"{settings.drafter}-{layers}", lm, Sampler(settings, pair.vocab_size), generator, stop_ids(pair)
    )
