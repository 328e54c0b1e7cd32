"""Faster fp32 linear layers on a CPU for the few-token passes speculative decoding makes.

A verify pass multiplies every weight matrix by k+1 token vectors. On CPUs where the BLAS
takes a slow path for so few rows (MKL on AMD processors, measured here: the 1536 -> 8960
projection over 5 tokens took 17.5 ms as `x @ W.T` and 9.3 ms as `W @ x.T`), the same
product computed the other way round is up to twice as fast. One-token passes (plain
decoding, drafting) and long ones (the prompt) keep the usual call, so plain decoding is
unchanged bit for bit; the few-token results differ from it only by float rounding.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

# Pass sizes (tokens) that take the transposed product: a verify pass over k+1 <= 17 tokens.
FEW_ROWS = range(2, 18)


def _few_rows_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1]
    if rows not in FEW_ROWS:
        return F.linear(x, self.weight, self.bias)
    y = (self.weight @ x.reshape(rows, -1).T).T
    if self.bias is not None:
        y = y + self.bias
    return y.reshape(*x.shape[:-1], self.out_features)


def use_few_rows_product(model: torch.nn.Module) -> int:
    """Give every fp32 CPU linear layer of `model` the transposed few-row product; returns how many."""
    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module.weight.device.type == "cpu" and module.weight.dtype == torch.float32:
            module.forward = types.MethodType(_few_rows_forward, module)
            changed += 1
    return changed
