"""What speculative decoding should gain, from the acceptance rate alpha and the costs.

With acceptance probability alpha per drafted token, draft length k, one target pass
costing T and one drafted token costing D (the analysis of Leviathan, Kalman and Matias,
"Fast Inference from Transformers via Speculative Decoding", 2023):

    tokens per round  = 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha)
    speedup           = tokens per round * T / (k*D + T)

k = 0 means no drafting (one token per target pass: speedup 1). The formula takes a verify
pass over k+1 tokens to cost the same T as a one-token pass; on a CPU in fp32 it does not,
so `speedup_with_cost` / `best_k_with_cost` take a measured `cost_model.CostModel` instead.

Every function accepts numpy arrays for alpha (and k where it says so) and broadcasts, so
the app can draw alpha x k heatmaps in one call; plain numbers in give plain numbers out.
T and D are plain numbers; a round's cost is `CostModel.round_ms`, for a flat T as well.
"""

from __future__ import annotations

import numpy as np

from specviz import limits
from specviz.cost_model import CostModel
from specviz.errors import UserError, shown
from specviz.settings import MAX_K

# Best k is searched up to the largest k a run can use.
DEFAULT_K_MAX = MAX_K


def tokens_per_round(alpha, k):
    """Expected tokens one round yields: accepted drafts plus the one the target adds."""
    a, kk = np.broadcast_arrays(_alpha(alpha), _ks(k))
    with np.errstate(divide="ignore", invalid="ignore"):
        # 1 - alpha^(k+1) through expm1/log: no cancellation for alpha near 1; alpha = 0
        # gives log 0 = -inf, expm1(-inf) = -1, hence exactly 1. alpha = 1 is the limit k+1,
        # and k = 0 is exactly 1 (no rounding that would make plain decoding look faster).
        geometric = -np.expm1((kk + 1) * np.log(a)) / (1 - a)
    return _out(np.where(a == 1, kk + 1.0, np.where(kk == 0, 1.0, geometric)))


def flat(target_ms: float, draft_ms: float) -> CostModel:
    """T and D as a cost model in which a verify pass costs T whatever its size."""
    return CostModel({1: float(_positive(target_ms, "target_ms"))}, draft_ms)  # CostModel checks D


def speedup(alpha, k, target_ms: float, draft_ms: float):
    """Predicted speedup over plain decoding when a verify pass costs T whatever its size."""
    return speedup_with_cost(alpha, k, flat(target_ms, draft_ms))


def best_k(alpha, target_ms: float, draft_ms: float, k_max: int = DEFAULT_K_MAX):
    """The draft length in 0..k_max with the highest predicted speedup, and that speedup.

    Ties go to the smaller k. Arrays of alpha give arrays of k and speedup.
    """
    return best_k_with_cost(alpha, flat(target_ms, draft_ms), k_max=k_max)


def break_even_alpha(k, target_ms: float, draft_ms: float):
    """The alpha at which drafting k tokens neither gains nor loses (speedup exactly 1).

    Below it, drafting costs more than it saves. k = 0 or D = 0 never loses: 0. D > T never
    wins, even at alpha = 1: nan.
    """
    cost = flat(target_ms, draft_ms)
    kk = _ks(k)
    # The speedup rises strictly with alpha on [0, 1] (k >= 1): bisect all at once.
    lo, hi = np.zeros(kk.shape), np.ones(kk.shape)
    for _ in range(64):
        mid = (lo + hi) / 2
        below = np.asarray(speedup_with_cost(mid, kk, cost)) < 1
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    root = np.where((kk == 0) | (cost.draft == 0), 0.0, (lo + hi) / 2)
    # Compared exactly: at D = T the speedup at alpha = 1 is 1, which rounding can put below.
    return _out(np.where((kk > 0) & (cost.draft > cost.target), np.nan, root))


def speedup_with_cost(alpha, k, cost: CostModel, target_ms=None):
    """Speedup when a round drafting k tokens costs `cost.round_ms(k)`, V(n) as measured:

        tokens_per_round * T0 / (k*D + V(k+1))

    T0 is the cost of one plain-decoding step: target_ms, or V(1) when not given.
    """
    kk = _ks(k)
    t0 = cost.target if target_ms is None else _positive(target_ms, "target_ms")
    ks = np.unique(kk)
    rounds = np.asarray([cost.round_ms(int(m)) for m in ks.ravel()], dtype=float)
    return _out(np.asarray(tokens_per_round(alpha, kk)) * t0 / rounds[np.searchsorted(ks, kk)])


def best_k_with_cost(alpha, cost: CostModel, k_max: int | None = None):
    """best_k for a measured cost. k_max defaults to MAX_K, capped for a table that says
    nothing past its end at its largest pass size less one."""
    if k_max is None:
        k_max = DEFAULT_K_MAX if cost.extrapolate else min(DEFAULT_K_MAX, max(cost.verify) - 1)
    ks = np.arange(_k_max(k_max) + 1)
    a = _alpha(alpha)[..., None]
    return _argmax_k(np.asarray(speedup_with_cost(a, ks, cost)))


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
        raise UserError(f"k_max must be a whole number, 0 or more (got {shown(k_max)})")
    return limits.K_MAX.check(int(k_max))


def _positive(x, name: str):
    a = np.asarray(x, dtype=float)
    if not np.all((a > 0) & np.isfinite(a)):
        raise UserError(f"{name} must be above 0 and finite (got {_show(x)})")
    return x


def _argmax_k(s: np.ndarray):
    """(k, speedup) of the best k along the last axis; argmax picks the first of ties."""
    k = np.argmax(s, axis=-1)
    best = np.take_along_axis(s, k[..., None], axis=-1)[..., 0]
    if k.ndim == 0:
        return int(k), float(best)
    return k, best


def _out(x: np.ndarray):
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x


def _show(x) -> str:
    a = np.asarray(x)
    return repr(x) if a.ndim == 0 else f"an array with values from {a.min()!r} to {a.max()!r}"
