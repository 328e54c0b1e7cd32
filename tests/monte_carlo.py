"""A toy language and a frequency check, shared by the Monte Carlo tests of every acceptance
rule (tests/test_verify_tree.py, test_copy_span.py, test_draft_free.py, test_head.py).

The language: 4 tokens whose target p (kind 0) and draft q (kind 1) at every context are
fixed pseudo-random distributions, with a zero on each side. The check: each outcome
expected at least 5 times must have an observed frequency within 5 standard errors,
sqrt(p (1 - p) / N), of its target probability; rarer outcomes are pooled into one bucket
held to the same bound; outcomes of probability 0 must never appear.
"""

import functools

import torch

SIGMAS = 5
V = 4
N_RUNS = 40_000


def frequencies_match(counts: torch.Tensor, p: torch.Tensor, n: int) -> tuple[bool, str]:
    p = p.double()
    if torch.any(counts[p == 0] != 0):
        return False, "an outcome of target probability 0 came out"
    common = p * n >= 5
    buckets_p = torch.cat([p[common], p[~common].sum().view(1)])
    buckets_c = torch.cat([counts[common], counts[~common].sum().view(1)]).double()
    se = torch.sqrt(buckets_p * (1 - buckets_p) / n)
    dev = (buckets_c / n - buckets_p).abs()
    z = (dev / se.clamp_min(1e-12)).max().item()
    ok = bool(((dev - SIGMAS * se) <= 1e-12).all())
    return ok, f"worst deviation {z:.1f} standard errors (N={n}): {(buckets_c / n).tolist()} vs {buckets_p.tolist()}"


# ---- a toy language: fixed target and draft distributions at every context -----------------


@functools.lru_cache(maxsize=None)
def toy(kind: int, context: tuple[int, ...]) -> torch.Tensor:
    """Target (kind 0) or draft (kind 1) next-token distribution after `context`."""
    seed = 1 + kind + 7 * sum((t + 1) * 5**i for i, t in enumerate(context)) + 1000 * len(context)
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(V, generator=g, dtype=torch.float64) * 1.5
    logits[(seed * 3 + kind) % V] = float("-inf")  # a zero on each side, often in different places
    return logits.softmax(-1)


def target_rows(context: tuple[int, ...], tokens: list[int], parents: list[int]) -> torch.Tensor:
    """p after the context, then after each node of the tree."""
    paths: list[tuple[int, ...]] = []
    for t, par in zip(tokens, parents):
        paths.append((paths[par] if par >= 0 else ()) + (t,))
    return torch.stack([toy(0, context)] + [toy(0, context + path) for path in paths])
