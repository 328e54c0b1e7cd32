"""Faster fp32 linear layers on a CPU for the few-token passes speculative decoding makes.

A verify pass multiplies every weight matrix by k+1 token vectors. On CPUs where the BLAS
takes a slow path for so few rows (MKL on AMD processors), the same product computed the
other way round (`W @ x.T` instead of `x @ W.T`) is up to twice as fast. One-token passes
(plain decoding, drafting) and long ones (the prompt) keep the usual call, so plain decoding
is unchanged bit for bit; the few-token results differ from it only by float rounding.

The BLAS also works through the token vectors in blocks (of 4 on the machine measured), so
a product over 3 of them can cost more than one over 4. So each model's layers time the
product once per row count when patched, and pad the rows with zeros up to the cheapest
count at or above the one asked for; the padding rows are dropped from the result, and every
other row is computed just as it would be without them. Measured figures: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from specviz.lm.timing import seconds

# Pass sizes (tokens) that take the transposed product: a verify pass over k+1 <= 17 tokens.
FEW_ROWS = range(2, 18)
# Rows are padded only for a product at least this much faster: the rest is timing noise.
PAD_GAIN = 0.9
# Layers bigger than this (the output head over the vocabulary) are not timed: too slow.
MAX_TIMED = 1 << 25


def _few_rows_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows, shape = x.numel() // x.shape[-1], x.shape
    if rows not in FEW_ROWS:
        return F.linear(x, self.weight, self.bias)
    x = x.reshape(rows, -1)
    padded = self.rows_to.get(rows, rows)
    if padded > rows:
        x = torch.cat([x, x.new_zeros(padded - rows, x.shape[1])])
    y = (self.weight @ x.T).T[:rows]
    if self.bias is not None:
        y = y + self.bias
    return y.reshape(*shape[:-1], self.out_features)


def use_few_rows_product(model: torch.nn.Module, rows_to: dict[int, int] | None = None) -> int:
    """Give every fp32 CPU linear layer of `model` the transposed few-row product; returns how
    many. `rows_to` (row count -> padded row count) is timed on the model's biggest layer
    below the output head unless given."""
    layers = [
        m
        for m in model.modules()
        if isinstance(m, torch.nn.Linear) and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32
    ]
    timed = [m.weight for m in layers if m.weight.numel() <= MAX_TIMED]
    if rows_to is None:
        rows_to = cheapest_rows(max(timed, key=torch.Tensor.numel)) if timed else {}
    for module in layers:
        module.rows_to = rows_to
        # A layer of a model spread by accelerate has a hook around its forward (moving its
        # inputs, fetching offloaded weights): the product goes inside the hook, not over it.
        patched = types.MethodType(_few_rows_forward, module)
        if hasattr(module, "_hf_hook"):
            module._old_forward = patched
        else:
            module.forward = patched
    return len(layers)


def cheapest_rows(weight: torch.Tensor, repeats: int = 5) -> dict[int, int]:
    """For each row count n in FEW_ROWS, the count m >= n whose product with `weight` is
    fastest (best of `repeats` timings), where padding to it pays by PAD_GAIN."""
    best: dict[int, float] = {}
    with torch.inference_mode():
        weight @ torch.zeros(FEW_ROWS[-1], weight.shape[1]).T  # warm-up
        for _ in range(repeats):
            for n in FEW_ROWS:
                x = torch.zeros(n, weight.shape[1])  # as the forward multiplies: by a transposed view
                best[n] = min(best.get(n, float("inf")), seconds(lambda: weight @ x.T, weight.device))
    table = {}
    for n in FEW_ROWS:
        m = min((m for m in FEW_ROWS if m >= n), key=best.__getitem__)
        table[n] = m if best[m] < PAD_GAIN * best[n] else n
    return table
