"""What the output format did at each verified position, for the Round inspector: how many
tokens it allowed, and how much of p's mass those tokens held before the mask."""

from __future__ import annotations

import torch


def annotate(positions: list, allowed: torch.Tensor, unmasked: torch.Tensor, sampler) -> None:
    """Set each `events.PositionInfo`'s `allowed` and `kept` from the rows along the path: the
    grammar's mask, and the target's logits before it (p before the mask: the processed
    distribution, or under greedy decoding the plain softmax, whose argmax is the choice)."""
    n = len(positions)
    p = unmasked[:n].softmax(-1) if sampler.greedy else sampler.distribution(unmasked[:n])
    on = allowed[:n].to(p.device)
    counts, kept = on.sum(-1).tolist(), (p * on).sum(-1).clamp(0, 1).tolist()
    for info, c, k in zip(positions, counts, kept):
        info.allowed, info.kept = int(c), float(k)
