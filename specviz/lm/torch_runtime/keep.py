"""Which positions' logits a forward pass computes, in a form every precision runs fast.

transformers slices the hidden states with `hidden[:, -keep:, :]` when `logits_to_keep` is
an int. That view keeps the whole sequence's batch stride, and on a CPU a bf16 matmul over
such a view takes a slow path, many times the cost of the same row with its own storage (fp32
is not affected; docs/BENCHMARKS.md, "Figures behind the code"). transformers' own
`generate` pays this at every prefill.
An index tensor instead of an int makes transformers gather the rows into a new tensor.
"""

from __future__ import annotations

import torch


def logits_to_keep(n: int, keep: int, device) -> int | torch.Tensor:
    """The `logits_to_keep` argument for a pass over `n` new tokens that needs the logits of
    the last `keep` of them (0: all)."""
    if keep <= 0 or keep >= n:
        return 0
    return torch.arange(n - keep, n, device=device)


def last_rows(hidden: torch.Tensor, keep: int) -> torch.Tensor:
    """`hidden[:, -keep:]` (all of it when keep is 0) as rows with their own storage."""
    if keep <= 0 or keep >= hidden.shape[1]:
        return hidden
    return own_storage(hidden[:, -keep:])


def own_storage(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` laid out densely in storage of its own (clone() would keep a view's
    strides, and contiguous() leaves a (1, 1, H) view of a longer sequence as it is)."""
    return torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t)
