"""Linear layers in oneDNN's packed weight layout, for the lean loop (lm.torch_runtime.lean) on a CPU.

A verify pass multiplies every weight matrix by k+1 token vectors. The BLAS behind
`F.linear` (MKL) takes a slow path for so few rows, although a 5-token pass reads the same
weights once as a 1-token pass does. oneDNN's inner-product kernel over a weight reordered
once into its own blocked layout reads the weights as a stream whatever the row count
(docs/BENCHMARKS.md, "Packed weights for the target").

The packed copy sits beside the model's own weights (transformers' forward and the bench's
transformers runs keep using those), so it costs the linear weights' bytes
again: it is made only when that much memory is free. One copy per model object, shared by
every run. Where oneDNN cannot pack the dtype (bf16 on a CPU without avx512 or
AVX-NE-CONVERT), the layers keep their usual product.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import torch

from specviz.models.memory import ram_available

# The packing is made for passes of about this many rows (a verify pass); any count works.
ROWS_HINT = 5
# Memory that must stay free after packing, beyond the packed bytes themselves.
HEADROOM = 1 << 30
DTYPES = (torch.float32, torch.bfloat16)

_packed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class PackedLinear:
    """`linear(x)` as oneDNN's inner product over a packed copy of its weight."""

    def __init__(self, linear: torch.nn.Linear):
        self.weight = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS_HINT)
        self.bias = None if linear.bias is None else linear.bias.detach()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")


def packed_linears(model: torch.nn.Module) -> dict[torch.nn.Module, Callable] | None:
    """The model's linear layers mapped to packed products, made on first use; None where
    packing does not apply (not a CPU model, a dtype oneDNN cannot pack here, too little
    free memory)."""
    with _lock:
        if model in _packed:
            return _packed[model]
        table = _pack(model)
        _packed[model] = table
        return table


def packed_bytes(model: torch.nn.Module) -> int:
    """Bytes the packed copy of `model`'s layers holds (0 if there is none)."""
    table = _packed.get(model)
    return sum(p.weight.numel() * p.weight.element_size() for p in table.values()) if table else 0


def _pack(model: torch.nn.Module) -> dict[torch.nn.Module, Callable] | None:
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not layers or not torch.backends.mkldnn.is_available():
        return None
    if any(m.weight.device.type != "cpu" or m.weight.dtype not in DTYPES for m in layers):
        return None
    need = sum(m.weight.numel() * m.weight.element_size() for m in layers)
    if ram_available() < need + HEADROOM:
        return None
    try:
        with torch.inference_mode():
            return {m: PackedLinear(m) for m in layers}
    except RuntimeError:
        return None  # oneDNN cannot pack this dtype on this CPU
