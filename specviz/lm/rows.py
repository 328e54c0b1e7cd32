"""Argmax and top-k over the rows of a logits or probability tensor.

On a CPU, numpy's argmax and partition over a 150k-token row take a fraction of what torch's
argmax and top-k do, and both decoders pay them every round beside a small model's pass
(docs/BENCHMARKS.md has the timings). Ties go to the first index, as torch's argmax
documents, so greedy choices do not depend on which is used.
"""

from __future__ import annotations

import numpy as np
import torch

_NUMPY = (torch.float32, torch.float64)


def _as_numpy(t: torch.Tensor) -> np.ndarray | None:
    return t.numpy() if t.device.type == "cpu" and t.dtype in _NUMPY and not t.requires_grad else None


def argmax(t: torch.Tensor) -> torch.Tensor:
    """Index of the largest entry along the last dimension (first on ties), as torch.long."""
    a = _as_numpy(t)
    if a is None:
        return t.argmax(-1)
    return torch.from_numpy(np.asarray(a.argmax(-1), dtype=np.int64))


def top(t: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest entries of each row of a 2-D `t`, largest first: (values, indices)."""
    k = min(k, t.shape[-1])
    a = _as_numpy(t)
    if a is None:
        got = t.topk(k, dim=-1)
        return got.values, got.indices
    part = np.argpartition(a, -k, axis=-1)[:, -k:]
    vals = np.take_along_axis(a, part, axis=-1)
    order = np.argsort(-vals, axis=-1, kind="stable")
    idx = np.take_along_axis(part, order, axis=-1)
    return torch.from_numpy(np.take_along_axis(vals, order, axis=-1)), torch.from_numpy(idx.astype(np.int64))
