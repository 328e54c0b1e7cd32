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
# `top` looks for the largest entries block by block (`_candidates`).
BLOCK = 1024


def _as_numpy(t: torch.Tensor) -> np.ndarray | None:
    return t.numpy() if t.device.type == "cpu" and t.dtype in _NUMPY and not t.requires_grad else None


def argmax(t: torch.Tensor) -> torch.Tensor:
    """Index of the largest entry along the last dimension (first on ties), as torch.long."""
    a = _as_numpy(t)
    if a is None:
        return t.argmax(-1)
    return torch.from_numpy(np.asarray(a.argmax(-1), dtype=np.int64))


def top(t: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest entries of each row of a 2-D `t`, largest first (first index on ties):
    (values, indices)."""
    k = min(k, t.shape[-1])
    a = _as_numpy(t)
    if a is None:
        got = t.topk(k, dim=-1)
        return got.values, got.indices
    idx = np.stack([_top_row(row, k) for row in a]) if len(a) else np.zeros((0, k), dtype=np.int64)
    return torch.from_numpy(np.take_along_axis(a, idx, axis=-1)), torch.from_numpy(idx.astype(np.int64))


def _top_row(row: np.ndarray, k: int) -> np.ndarray:
    cand = _candidates(row, k)  # ascending
    vals = row[cand]
    keep = cand[vals >= np.partition(vals, -k)[-k]]  # the k largest and every tie with the k-th
    return keep[np.argsort(-row[keep], kind="stable")[:k]]  # stable: the first index on ties


def _candidates(row: np.ndarray, k: int) -> np.ndarray:
    """Ascending indices that hold the row's k largest entries: every whole block of BLOCK
    entries whose maximum is among the k largest maxima (ties included), and the tail past
    the last whole block. Each of the k largest entries lies in a block whose maximum is at
    least as large. Block maxima read the row once, far cheaper than partitioning all of it,
    which every round's display data would pay."""
    n = row.shape[0]
    whole = n // BLOCK * BLOCK
    if whole // BLOCK <= k:
        return np.arange(n)
    maxima = row[:whole].reshape(-1, BLOCK).max(-1)
    blocks = np.flatnonzero(maxima >= np.partition(maxima, -k)[-k])
    inside = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
    return np.concatenate([inside, np.arange(whole, n)])
