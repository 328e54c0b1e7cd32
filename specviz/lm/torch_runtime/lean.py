"""A decoding loop without transformers' per-layer Python, for drafts and targets alike.

A drafted token is a one-token pass, and a small model's one-token pass on a CPU spends a
large share of its time outside the matrix products: a module call per sub-layer, a cache
concatenation per layer per token, masks and positions rebuilt every pass. `LeanLM` runs the
same weights (the same module objects, int8 or not) through one plain loop over the layers,
with the KV cache in a preallocated buffer that a crop merely shortens. Measured on the
bundled 0.5B int8 draft: docs/BENCHMARKS.md ("A leaner drafting pass").

On a CPU the loop multiplies by oneDNN-packed copies of the linear weights where memory
allows (`lm.torch_runtime.packed`): a few-token verify pass then costs little more than a one-token pass.
The engine runs the target through it for plain decoding, chain rounds and tree rounds (a
tree pass is the same loop under a tree mask, at each node's own position: `lm.tree`).

Only decoders shaped like Llama and Qwen2 take this path (RMS norms, rotary positions from a
fixed frequency table, grouped-query attention over every earlier token, a SiLU-gated MLP);
`model_lm` gives anything else the usual `CachedLM`. Exactness does not rest on this loop
matching transformers' forward: q is whatever distribution the draft sampled from, and this
pass is what computes it; for the target, plain decoding and every round go through
the same loop, so the output is distributed as its plain decoding is. It does match, to
float rounding (tests/test_lm_lean.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specviz.lm.torch_runtime.base import TorchLM
from specviz.lm.torch_runtime.cached import cached_lm
from specviz.lm.torch_runtime.packed import packed_linears

SHAPES = ("llama", "qwen2")
# Rotary variants whose frequencies do not change with the sequence length.
FIXED_ROPE = ("default", "linear", "llama3")
# Positions the cache holds at first; it doubles when a run needs more.
FIRST_CAPACITY = 512


def model_lm(model: torch.nn.Module, device: torch.device) -> TorchLM:
    """`model` with a KV cache, as drafters and the engine run it: the lean loop where
    `model` has a shape it knows, transformers' forward otherwise."""
    if lean_supported(model):
        return LeanLM(model, device)
    return cached_lm(model, device)


def lean_supported(model: torch.nn.Module) -> bool:
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if config is None or inner is None or getattr(config, "model_type", None) not in SHAPES:
        return False
    if getattr(model, "hf_device_map", None) or getattr(config, "hidden_act", None) != "silu":
        return False  # spread over devices (hooks move tensors), or another activation
    rotary = getattr(inner, "rotary_emb", None)
    if rotary is None or getattr(rotary, "rope_type", None) not in FIXED_ROPE:
        return False
    if getattr(config, "use_sliding_window", False) or any(
        t != "full_attention" for t in (getattr(config, "layer_types", None) or [])
    ):
        return False
    for layer in inner.layers:
        attn = layer.self_attn
        if not all(hasattr(attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj")):
            return False
        if abs(attn.scaling - attn.head_dim**-0.5) > 1e-12:
            return False
    return True


class LeanLM(TorchLM):
    """A `TorchLM` over a Llama / Qwen2 decoder's own modules."""

    def __init__(self, model: torch.nn.Module, device: torch.device):
        inner, config = model.model, model.config
        self.device = device
        # Each linear layer as the loop calls it: its packed product where there is one.
        table = packed_linears(model) or {}
        self.loop = "lean, packed weights" if table else "lean"

        def lin(module):
            return table.get(module, module)

        self._embed = inner.embed_tokens
        self._head = lin(model.lm_head)
        self._norm = (inner.norm.weight, inner.norm.variance_epsilon)
        first = inner.layers[0].self_attn
        self._head_dim = first.head_dim
        self._heads, self._kv_heads = config.num_attention_heads, config.num_key_value_heads
        self._layers = [
            (
                L.input_layernorm.weight,
                L.input_layernorm.variance_epsilon,
                lin(L.self_attn.q_proj),
                lin(L.self_attn.k_proj),
                lin(L.self_attn.v_proj),
                lin(L.self_attn.o_proj),
                L.post_attention_layernorm.weight,
                L.post_attention_layernorm.variance_epsilon,
                lin(L.mlp.gate_proj),
                lin(L.mlp.up_proj),
                lin(L.mlp.down_proj),
            )
            for L in inner.layers
        ]
        self._rotary = inner.rotary_emb
        self._keys = self._values = self._cos = self._sin = None
        self.length = 0
        self.features: torch.Tensor | None = None  # (n_kept, hidden) of the last pass
        self.vocab_size = int(config.vocab_size)

    def keep_features(self) -> None:
        """Keep the last pass's final hidden states in `features` (this loop always does)."""

    def reset(self) -> None:
        self.length = 0  # the buffers stay allocated for the next run
        self._tree = None

    def crop(self, length: int) -> None:
        self._tree = None
        self.length = min(self.length, length)

    @torch.inference_mode()  # the buffers are inference tensors: written only in that mode
    def _move_rows(self, src: torch.Tensor, start: int) -> None:
        src, end = src.to(self.device), start + len(src)
        self._keys[:, :, start:end] = self._keys.index_select(2, src)
        self._values[:, :, start:end] = self._values.index_select(2, src)

    @torch.inference_mode()
    def _pass(
        self, ids: torch.Tensor, keep: int, allowed: torch.Tensor | None = None, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        ids = ids.to(self.device)
        n, start = ids.numel(), self.length
        end = start + n
        x = self._embed(ids)[None]  # (1, n, hidden)
        self._make_room(end, x.dtype)
        if positions is None:  # a chain: the next positions
            cos, sin = self._cos[start:end], self._sin[start:end]
        else:
            cos, sin = self._cos[positions], self._sin[positions]
        half = self._head_dim // 2
        heads, kv = self._heads, self._kv_heads
        # One new token attends to every cached one; several attend causally among themselves.
        mask = allowed
        if mask is None and n > 1:
            mask = torch.ones(n, end, dtype=torch.bool, device=self.device).tril(start)
        for i, (w1, eps1, q_proj, k_proj, v_proj, o_proj, w2, eps2, gate, up, down) in enumerate(self._layers):
            h = _rms_norm(x, w1, eps1)
            # Queries and keys rotate together: one rotary step instead of two.
            qk = torch.cat((q_proj(h), k_proj(h)), -1).view(1, n, heads + kv, self._head_dim).transpose(1, 2)
            qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), -1) * sin
            self._keys[i, :, start:end] = qk[0, heads:]
            self._values[i, :, start:end] = v_proj(h).view(n, kv, self._head_dim).transpose(0, 1)
            att = F.scaled_dot_product_attention(
                qk[:, :heads],
                self._keys[i, None, :, :end],
                self._values[i, None, :, :end],
                attn_mask=mask,
                enable_gqa=True,
            )
            x = x + o_proj(att.transpose(1, 2).reshape(1, n, -1))
            h = _rms_norm(x, w2, eps2)
            x = x + down(F.silu(gate(h)) * up(h))
        if 0 < keep < n:
            x = x[:, -keep:]
        x = _rms_norm(x, *self._norm)
        self.length = end
        self.features = x[0]  # what the LM head reads: a draft head's input (drafters.head)
        return self._head(x.contiguous())[0]

    def _make_room(self, positions: int, dtype: torch.dtype) -> None:
        """Buffers for at least `positions` cached tokens (and their rotary angles)."""
        have = 0 if self._keys is None else self._keys.shape[2]
        if positions <= have:
            return
        cap = max(positions, 2 * have, FIRST_CAPACITY)
        shape = (len(self._layers), self._kv_heads, cap, self._head_dim)
        keys = torch.empty(shape, dtype=dtype, device=self.device)
        values = torch.empty_like(keys)
        if have:
            keys[:, :, :have], values[:, :, :have] = self._keys, self._values
        # The model's own rotary table, once for every position the buffers hold.
        cos, sin = self._rotary(keys, torch.arange(cap, device=self.device)[None])
        self._cos, self._sin = cos[0], sin[0]
        self._keys, self._values = keys, values


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The models' RMS norm: fused in fp32; in a half precision as transformers computes it
    (normalised in fp32, rounded to the half precision, then scaled), so a bf16 target's
    logits are the ones its own forward gives."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)
