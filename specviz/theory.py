"""What speculative decoding should gain, from the acceptance rate alpha and the costs.

With acceptance probability alpha per drafted token, draft length k, one target pass
costing T and one drafted token costing D (the analysis of Leviathan, Kalman and Matias,
"Fast Inference from Transformers via Speculative Decoding", 2023):

    tokens per round  = 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha)
    speedup           = tokens per round * T / (k*D + T)

k = 0 means no drafting (one token per target pass: speedup 1). The formula takes a verify
pass over k+1 tokens to cost the same T as a one-token pass; on a CPU in fp32 it does not,
so `speedup_with_cost` / `best_k_with_cost` take a measured cost per pass size instead.

Every function accepts numpy arrays for alpha (and k where it says so) and broadcasts, so
the app can draw alpha x k heatmaps in one call; plain numbers in give plain numbers out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Union

import numpy as np

from specviz import limits
from specviz.cost_curve import CostCurve
from specviz.errors import UserError
from specviz.settings import MAX_K

# Best k is searched up to the largest k a run can use.
DEFAULT_K_MAX = MAX_K

# A verify-pass cost model: ms for a target pass over n new tokens. A callable n -> ms;
# a sequence whose entry i is the cost of i+1 tokens; or a mapping {n: ms} of measured
# sizes, interpolated linearly between them (e.g. passes timed at 1, 2, 4, 8 and 16 tokens).
VerifyCosts = Union[Callable[[int], float], Sequence[float], Mapping[int, float]]


def tokens_per_round(alpha, k):
    """Expected tokens one round yields: accepted drafts plus the one the target adds."""
    a, kk = np.broadcast_arrays(_alpha(alpha), _ks(k))
    with np.errstate(divide="ignore", invalid="ignore"):
        # 1 - alpha^(k+1) through expm1/log: no cancellation for alpha near 1; alpha = 0
        # gives log 0 = -inf, expm1(-inf) = -1, hence exactly 1. alpha = 1 is the limit k+1,
        # and k = 0 is exactly 1 (no rounding that would make plain decoding look faster).
        geometric = -np.expm1((kk + 1) * np.log(a)) / (1 - a)
    return _out(np.where(a == 1, kk + 1.0, np.where(kk == 0, 1.0, geometric)))


def speedup(alpha, k, target_ms, draft_ms):
    """Predicted speedup over plain decoding when a verify pass costs T whatever its size."""
    t, d = _positive(target_ms, "target_ms"), _non_negative(draft_ms, "draft_ms")
    kk = _ks(k)
    return _out(np.asarray(tokens_per_round(alpha, kk)) * t / (kk * d + t))


def best_k(alpha, target_ms, draft_ms, k_max: int = DEFAULT_K_MAX):
    """The draft length in 0..k_max with the highest predicted speedup, and that speedup.

    Ties go to the smaller k. Arrays of alpha give arrays of k and speedup.
    """
    ks = np.arange(_k_max(k_max) + 1)
    a = _alpha(alpha)[..., None]
    t = np.asarray(_positive(target_ms, "target_ms"), dtype=float)[..., None]
    d = np.asarray(_non_negative(draft_ms, "draft_ms"), dtype=float)[..., None]
    return _argmax_k(np.asarray(speedup(a, ks, t, d)))


def break_even_alpha(k, target_ms, draft_ms):
    """The alpha at which drafting k tokens neither gains nor loses (speedup exactly 1).

    Below it, drafting costs more than it saves. Solves tokens_per_round(alpha, k) =
    1 + k*D/T. k = 0 or D = 0 never loses: 0. D > T never wins, even at alpha = 1: nan.
    """
    t, d = _positive(target_ms, "target_ms"), _non_negative(draft_ms, "draft_ms")
    kk, t, d = np.broadcast_arrays(_ks(k), np.asarray(t, dtype=float), np.asarray(d, dtype=float))
    need = 1 + kk * d / t
    # tokens_per_round rises strictly with alpha on [0, 1] (k >= 1): bisect all at once.
    lo, hi = np.zeros(need.shape), np.ones(need.shape)
    for _ in range(64):
        mid = (lo + hi) / 2
        below = np.asarray(tokens_per_round(mid, kk)) < need
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    root = (lo + hi) / 2
    root = np.where((kk == 0) | (d == 0), 0.0, root)
    return _out(np.where(need > kk + 1, np.nan, root))


def speedup_with_cost(alpha, k, verify_ms: VerifyCosts, draft_ms, target_ms=None):
    """Speedup when a verify pass over n tokens costs verify_ms(n), as measured.

        tokens_per_round * T0 / (k*D + V(k+1))

    T0 is the cost of one plain-decoding step: target_ms, or V(1) when not given.
    """
    cost = _cost_fn(verify_ms)
    kk = _ks(k)
    d = _non_negative(draft_ms, "draft_ms")
    t0 = cost(1) if target_ms is None else _positive(target_ms, "target_ms")
    sizes = np.unique(kk + 1)
    v = np.asarray([cost(int(n)) for n in sizes.ravel()], dtype=float)
    verify = v[np.searchsorted(sizes, kk + 1)]
    return _out(np.asarray(tokens_per_round(alpha, kk)) * t0 / (kk * d + verify))


def best_k_with_cost(alpha, verify_ms: VerifyCosts, draft_ms, target_ms=None, k_max: int | None = None):
    """best_k for a measured verify cost. k_max defaults to MAX_K, capped at the largest
    pass size a table (sequence or mapping) measured, less one: no extrapolation."""
    if k_max is None:
        k_max = min(DEFAULT_K_MAX, _measured_max_n(verify_ms) - 1)
    ks = np.arange(_k_max(k_max) + 1)
    a = _alpha(alpha)[..., None]
    return _argmax_k(np.asarray(speedup_with_cost(a, ks, verify_ms, draft_ms, target_ms)))


def accepted_length_distribution(alpha, k: int):
    """P(n drafts accepted in a round) for n = 0..k: the truncated geometric.

    P(n) = alpha^n * (1 - alpha) for n < k, and P(k) = alpha^k (all accepted). The last
    axis holds n; an array of alpha adds its shape in front.
    """
    n = np.arange(_k_max(k) + 1)
    a = _alpha(alpha)[..., None]
    return a**n * np.where(n < k, 1 - a, 1.0)


def _alpha(alpha) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    if not np.all((a >= 0) & (a <= 1)):
        raise UserError(f"alpha must be between 0 and 1 (got {_show(alpha)})")
    return a


def _ks(k) -> np.ndarray:
    kk = np.asarray(k)
    if kk.dtype.kind == "f" and np.all(kk == np.round(kk)):
        kk = kk.astype(int)
    if kk.dtype.kind not in "iu" or np.any(kk < 0):
        raise UserError(f"k must be a whole number, 0 or more (got {_show(k)})")
    if kk.size:
        limits.K_MAX.check(int(kk.max()), "k")
    return kk


def _k_max(k_max) -> int:
    if isinstance(k_max, bool) or not isinstance(k_max, (int, np.integer)) or k_max < 0:
        raise UserError(f"k_max must be a whole number, 0 or more (got {k_max!r})")
    return limits.K_MAX.check(int(k_max))


def _positive(x, name: str):
    a = np.asarray(x, dtype=float)
    if not np.all((a > 0) & np.isfinite(a)):
        raise UserError(f"{name} must be above 0 and finite (got {_show(x)})")
    return x


def _non_negative(x, name: str):
    a = np.asarray(x, dtype=float)
    if not np.all((a >= 0) & np.isfinite(a)):
        raise UserError(f"{name} must be 0 or more and finite (got {_show(x)})")
    return x


def _argmax_k(s: np.ndarray):
    """(k, speedup) of the best k along the last axis; argmax picks the first of ties."""
    k = np.argmax(s, axis=-1)
    best = np.take_along_axis(s, k[..., None], axis=-1)[..., 0]
    if k.ndim == 0:
        return int(k), float(best)
    return k, best


def _cost_fn(verify_ms: VerifyCosts) -> Callable[[int], float]:
    if callable(verify_ms):
        return lambda n: _checked_cost(verify_ms(n), n)
    if isinstance(verify_ms, Mapping):
        curve = CostCurve(verify_ms, extrapolate=False)  # a table says nothing past its largest size
        return lambda n: _checked_cost(curve(n), n)
    table = list(verify_ms)

    def tabulated(n: int) -> float:
        if not 1 <= n <= len(table):
            raise UserError(
                f"verify cost measured for 1 to {len(table)} tokens only; a pass over {n} tokens was asked for"
            )
        return _checked_cost(table[n - 1], n)

    return tabulated


def _measured_max_n(verify_ms: VerifyCosts) -> int:
    if callable(verify_ms):
        return DEFAULT_K_MAX + 1
    return int(max(verify_ms)) if isinstance(verify_ms, Mapping) else len(verify_ms)


def _checked_cost(ms, n: int) -> float:
    ms = float(ms)
    if not ms > 0:
        raise UserError(f"a verify pass over {n} tokens must cost more than 0 ms (got {ms!r})")
    return ms


def _out(x: np.ndarray):
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


def _show(x) -> str:
    a = np.asarray(x)
    return repr(x) if a.ndim == 0 else f"an array with values from {a.min()!r} to {a.max()!r}"
