"""Losslessness lab: Monte Carlo proof that the acceptance rule outputs exactly p.

One draw follows one drafted position of DESIGN.md section 1: draw x ~ q and u ~ U(0, 1);
keep x if u <= min(1, p(x) / q(x)); otherwise emit a token from the residual
norm(max(0, p - q)). Counting many draws gives the rule's output frequencies, which match
p up to sampling noise, while the acceptance rate matches the overlap sum min(p, q).

Vectorised with numpy in fixed-size chunks (memory stays bounded, and one seed gives one
answer whatever the sample count): tens of millions of draws take seconds.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from specviz.engine.verify import residual_distribution
from specviz.errors import UserError

SUM_TOLERANCE = 1e-6
CHUNK = 1 << 21  # draws per vectorised step: ~50 MB of temporaries
MAX_SAMPLES = 1_000_000_000


@dataclass
class LosslessResult:
    p: list[float]  # the target distribution the output must reproduce
    q: list[float]  # the draft distribution tokens are proposed from
    residual: list[float]  # norm(max(0, p - q)): where rejected draws are replaced from
    measured: list[float]  # output frequency of each token
    abs_error: list[float]  # |measured - p|
    std_error: list[float]  # sqrt(p (1 - p) / samples): the noise expected if the output is p
    acceptance_rate: float  # measured share of drafts kept
    overlap: float  # sum min(p, q): the acceptance rate the rule predicts
    acceptance_std_error: float  # sqrt(overlap (1 - overlap) / samples)
    max_z: float  # the largest |measured - p| in standard errors
    acceptance_z: float  # |acceptance_rate - overlap| in standard errors
    samples: int
    seed: int
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def check_distribution(values, name: str) -> np.ndarray:
    """A 1-D float64 array of probabilities, or UserError saying what is wrong with it."""
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a list of numbers") from None
    if a.ndim != 1 or a.size == 0:
        raise UserError(f"{name} must be a non-empty list of probabilities")
    if not np.all(np.isfinite(a)):
        raise UserError(f"{name} must hold finite numbers only")
    if np.any(a < 0):
        raise UserError(f"{name} must not hold negative probabilities (got {a.min():g})")
    total = float(a.sum())
    if abs(total - 1) > SUM_TOLERANCE:
        raise UserError(f"{name} must sum to 1 within {SUM_TOLERANCE:g} (it sums to {total:.9g})")
    return a


def parse_distribution(text: str, name: str) -> np.ndarray:
    """'0.5,0.2,0.2,0.1' -> a checked distribution."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise UserError(f"{name} must be comma-separated numbers, like 0.5,0.2,0.2,0.1 (got {text!r})") from None
    return check_distribution(values, name)


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The engine's own residual, so the lab tests the rule the engine runs."""
    return residual_distribution(torch.from_numpy(p), torch.from_numpy(q)).double().numpy()


def simulate(p, q, samples: int = 1_000_000, seed: int = 0) -> LosslessResult:
    """Run the acceptance rule `samples` times on p and q and measure what comes out."""
    p, q = check_distribution(p, "p"), check_distribution(q, "q")
    if p.size != q.size:
        raise UserError(f"p and q must cover the same vocabulary (p has {p.size} entries, q has {q.size})")
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise UserError(f"samples must be a whole number from 1 to {MAX_SAMPLES:,} (got {samples!r})")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"seed must be a whole number, 0 or more (got {seed!r})")

    res = residual(p, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.where(q > 0, np.minimum(1.0, p / q), 0.0)  # min(1, p(x)/q(x)); x never has q = 0
    q_cdf, res_cdf = _cdf(q), _cdf(res)
    rng = np.random.default_rng(seed)
    counts = np.zeros(p.size, dtype=np.int64)
    accepted = 0

    start = time.perf_counter()
    for done in range(0, samples, CHUNK):
        n = min(CHUNK, samples - done)
        x = _draw(rng, q_cdf, n)
        kept = x[rng.random(n) <= keep[x]]
        accepted += kept.size
        counts += np.bincount(kept, minlength=p.size)
        counts += np.bincount(_draw(rng, res_cdf, n - kept.size), minlength=p.size)
    seconds = time.perf_counter() - start

    measured = counts / samples
    abs_error = np.abs(measured - p)
    std_error = np.sqrt(p * (1 - p) / samples)
    overlap = float(np.minimum(p, q).sum())
    acceptance_rate = accepted / samples
    acceptance_se = math.sqrt(overlap * (1 - overlap) / samples)
    return LosslessResult(
        p=p.tolist(),
        q=q.tolist(),
        residual=res.tolist(),
        measured=measured.tolist(),
        abs_error=abs_error.tolist(),
        std_error=std_error.tolist(),
        acceptance_rate=acceptance_rate,
        overlap=overlap,
        acceptance_std_error=acceptance_se,
        max_z=float(np.max(_z(abs_error, std_error))),
        acceptance_z=float(_z(np.array(abs(acceptance_rate - overlap)), np.array(acceptance_se))),
        samples=samples,
        seed=seed,
        seconds=seconds,
    )


def _cdf(dist: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(dist)
    return cdf / cdf[-1]  # last entry exactly 1, so a uniform in [0, 1) always lands on a token


def _draw(rng: np.random.Generator, cdf: np.ndarray, n: int) -> np.ndarray:
    # Inverse-CDF sampling; side="right" skips zero-probability tokens (their cdf step is empty).
    return np.searchsorted(cdf, rng.random(n), side="right")


def _z(error: np.ndarray, se: np.ndarray) -> np.ndarray:
    """error / se, where a zero standard error (probability 0 or 1) allows no error at all."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, error / se, np.where(error > 0, np.inf, 0.0))
