"""Losslessness lab: Monte Carlo proof that the acceptance rule outputs exactly p.

One draw follows one drafted position of a round (docs/ARCHITECTURE.md): draw x ~ q and u ~ U(0, 1);
keep x with probability min(1, p(x) / q(x)); otherwise emit a token from the residual
norm(max(0, p - q)). The keep and the residual are the engine's own (`engine.verify.accepts`,
`residual_distribution`), run here on a chunk of draws at once. Counting many draws gives the
rule's output frequencies, which match p up to sampling noise, while the acceptance rate
matches the overlap sum min(p, q).

Vectorised in fixed-size chunks (memory stays bounded, and one seed gives one answer whatever
the sample count): tens of millions of draws take seconds.

`bug_gallery` runs the exact rule beside four mistakes found in real implementations, on the
same p and q with the same number of draws, and measures how far each one's output lands
from the distribution it should have (p at the sampling temperature), in total variation.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from specviz import limits
from specviz.engine import verify
from specviz.errors import UserError, shown
from specviz.workshop.cli import parse_list

SUM_TOLERANCE = 1e-6
CHUNK = 1 << 21  # draws per vectorised step: ~50 MB of temporaries


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
    if hasattr(values, "__len__"):
        limits.DISTRIBUTION_ENTRIES.check(len(values), f"{name}'s length")
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a list of numbers") from None
    if a.ndim != 1 or a.size == 0:
        raise UserError(f"{name} must be a non-empty list of probabilities")
    limits.DISTRIBUTION_ENTRIES.check(a.size, f"{name}'s length")
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
    if isinstance(text, str):  # anything else is refused by parse_list
        limits.check_distribution_text(text, name)
    values = parse_list(name, text, float, like="0.5,0.2,0.2,0.1", skip_blank=False)
    return check_distribution(values, name)


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The engine's own residual, so the lab tests the rule the engine runs."""
    return verify.residual_distribution(torch.from_numpy(p), torch.from_numpy(q)).double().numpy()


def simulate(p, q, samples: int = 1_000_000, seed: int = 0) -> LosslessResult:
    """Run the acceptance rule `samples` times on p and q and measure what comes out."""
    p, q = _check_inputs(p, q, samples, seed)
    res = residual(p, q)
    measured, acceptance_rate, seconds = _run(q, p, q, res, samples, seed)
    abs_error = np.abs(measured - p)
    std_error = np.sqrt(p * (1 - p) / samples)
    overlap = float(np.minimum(p, q).sum())
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
        max_z=float(np.max(z_scores(abs_error, std_error))),
        acceptance_z=float(z_scores(abs(acceptance_rate - overlap), acceptance_se)),
        samples=samples,
        seed=seed,
        seconds=seconds,
    )


# --- The bug gallery -------------------------------------------------------------------

DEFAULT_TEMPERATURE = 0.7  # two of the mistakes only show away from temperature 1
MAX_TEMPERATURE = 100.0
Z_TOLERANCE = 5  # "within noise": every token's frequency within this many standard errors of the target

RULES = ("exact", "argmax-accept", "replacement-from-p", "q-before-temperature", "p-without-temperature")

RULE_TITLES = {
    "exact": "keep x with min(1, p(x)/q(x)), else draw from norm(max(0, p \u2212 q))",
    "argmax-accept": "keep x only if it is argmax p, else emit argmax p",
    "replacement-from-p": "after a rejection, draw the replacement from p instead of the residual",
    "q-before-temperature": "the draft samples from q at T, the rule is given q at temperature 1",
    "p-without-temperature": "the rule is given p at temperature 1, not p at T",
}

IN_PRACTICE = {
    "exact": "The output is what the target alone would sample, only faster: the reference the others are measured against.",
    "argmax-accept": "Sampling quietly turns greedy: every seed gives much the same text, repetition loops appear and "
    "temperature, top-k and top-p stop mattering, while greedy identity checks still pass.",
    "replacement-from-p": "Tokens the draft also likes come out too often and those only the target likes too rarely, "
    "so the text drifts toward the draft model; greedy runs are unaffected, so identity tests pass.",
    "q-before-temperature": "Exact at temperature 1 and wrong at any other: below 1 the draft's favourite tokens are "
    "accepted too often (the output is too sharp), above 1 too rarely; tests at T = 1 never see it.",
    "p-without-temperature": "The output follows the target at temperature 1 whatever temperature is asked for: below 1 "
    "speculative text is more random than plain decoding at the same setting, above 1 less.",
}


@dataclass
class RuleResult:
    """One rule of the bug gallery: what it outputs and how far that is from what it should."""

    rule: str  # one of RULES
    title: str  # what the rule does, in a few words
    in_practice: str  # how the mistake shows up in a real deployment
    p: list[float]  # the target's distribution at temperature 1, as given
    q: list[float]  # the draft's distribution at temperature 1, as given
    temperature: float
    target: list[float]  # the distribution the output should have: p at the temperature
    draft: list[float]  # q at the temperature: what every rule's drafts are sampled from
    measured: list[float]  # output frequency of each token
    expected: list[float]  # the rule's exact output distribution, in closed form
    tv: float  # total variation distance of `measured` from `target`
    tv_std_error: float  # its standard error (delta method: reliable once the output is off)
    tv_expected: float  # TV of `expected` from `target`: where `tv` tends as draws grow
    tv_noise: float  # the TV sampling noise alone gives an output distributed exactly as `target`
    max_z: float  # the largest |measured - target| in standard errors of the target
    within_noise: bool  # max_z <= Z_TOLERANCE
    acceptance_rate: float  # share of drafts kept
    samples: int
    seed: int
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def at_temperature(dist, temperature: float) -> np.ndarray:
    """softmax(log(dist) / T): a distribution at temperature 1 taken to temperature T.
    Tokens with probability 0 keep it."""
    d = np.asarray(dist, dtype=np.float64)
    logits = np.full(d.shape, -np.inf)
    np.log(d, out=logits, where=d > 0)
    logits = logits / temperature
    e = np.exp(logits - logits.max())
    return e / e.sum()


def check_temperature(temperature) -> float:
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or not 0 < temperature <= MAX_TEMPERATURE
    ):
        raise UserError(
            f"temperature must be a number above 0 and at most {MAX_TEMPERATURE:g} (got {shown(temperature)})"
        )
    return float(temperature)


def rule_parts(
    rule: str, p: np.ndarray, q: np.ndarray, temperature: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(draft, p_told, q_told, replacement) of a rule: drafts x ~ draft go through the engine's
    check told p_told and q_told (`verify.accepts`); a rejected one is replaced by a draw from
    `replacement`. The exact rule tells it p and q at the temperature; each mistake tells it the
    wrong ones or replaces from the wrong distribution. p and q are at temperature 1."""
    p_t, q_t = at_temperature(p, temperature), at_temperature(q, temperature)
    if rule == "exact":
        return q_t, p_t, q_t, residual(p_t, q_t)
    if rule == "argmax-accept":
        # Greedy's check on sampled drafts: p told as a point mass at its argmax, each draft as a
        # point mass (q = 1), so only the argmax is kept and a rejection emits it.
        best = int(np.argmax(p))  # the same token at any temperature; ties go to the first
        point = np.zeros(p.size)
        point[best] = 1.0
        return q_t, point, np.ones(p.size), point
    if rule == "replacement-from-p":
        return q_t, p_t, q_t, p_t
    if rule == "q-before-temperature":
        return q_t, p_t, q, residual(p_t, q)  # q and q_t share their support
    if rule == "p-without-temperature":
        return q_t, p, q_t, residual(p, q_t)
    raise UserError(f"unknown rule {shown(rule)}: choose from {', '.join(RULES)}")


def expected_output(draft: np.ndarray, p_told: np.ndarray, q_told: np.ndarray, replacement: np.ndarray) -> np.ndarray:
    """A rule's output distribution in closed form: drafts kept with probability
    min(1, p_told / q_told) (`acceptance_probability`), then replacements for the rest."""
    kept = draft * acceptance_probability(p_told, q_told)
    return kept + (1 - kept.sum()) * replacement


def bug_gallery(
    p, q, temperature: float = DEFAULT_TEMPERATURE, samples: int = 1_000_000, seed: int = 0
) -> dict[str, RuleResult]:
    """Every rule of RULES run `samples` times on the same p and q (read as distributions at
    temperature 1; drafts are sampled at `temperature`), each from the same seed."""
    p, q = _check_inputs(p, q, samples, seed)
    temperature = check_temperature(temperature)
    target = at_temperature(p, temperature)
    se = np.sqrt(target * (1 - target) / samples)
    out = {}
    for rule in RULES:
        draft, p_told, q_told, replacement = rule_parts(rule, p, q, temperature)
        measured, acceptance_rate, seconds = _run(draft, p_told, q_told, replacement, samples, seed)
        expected = expected_output(draft, p_told, q_told, replacement)
        max_z = float(np.max(z_scores(np.abs(measured - target), se)))
        out[rule] = RuleResult(
            rule=rule,
            title=RULE_TITLES[rule],
            in_practice=IN_PRACTICE[rule],
            p=p.tolist(),
            q=q.tolist(),
            temperature=temperature,
            target=target.tolist(),
            draft=draft.tolist(),
            measured=measured.tolist(),
            expected=expected.tolist(),
            tv=total_variation(measured, target),
            tv_std_error=tv_std_error(measured, target, samples),
            tv_expected=total_variation(expected, target),
            tv_noise=tv_noise(target, samples),
            max_z=max_z,
            within_noise=max_z <= Z_TOLERANCE,
            acceptance_rate=acceptance_rate,
            samples=samples,
            seed=seed,
            seconds=seconds,
        )
    return out


def total_variation(a, b) -> float:
    return 0.5 * float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).sum())


def tv_std_error(measured, target, samples: int) -> float:
    """Standard error of the empirical TV by the delta method.

    Where the output distribution differs from the target on every token, the empirical TV is
    (1/2) sum_i s_i (f_i - t_i) with s_i = sign(f_i - t_i) fixed: a mean of `samples` draws of
    s_X / 2, whose variance is (sum_i f_i s_i^2 - (sum_i f_i s_i)^2) / 4. Where the output is
    the target, the TV is all noise: read it against `tv_noise` instead.
    """
    f, t = np.asarray(measured, dtype=np.float64), np.asarray(target, dtype=np.float64)
    s = np.sign(f - t)
    var = float((f * s * s).sum() - (f * s).sum() ** 2) / 4
    return math.sqrt(max(var, 0.0) / samples)


def tv_noise(target, samples: int) -> float:
    """The expected empirical TV of `samples` draws from `target` itself, to first order.

    Each |f_i - t_i| is about half-normal with scale sqrt(t_i (1 - t_i) / n), mean that times
    sqrt(2 / pi); half their sum is sum_i sqrt(t_i (1 - t_i) / (2 pi n)). An exact rule's TV
    sits near this, not at 0: an empirical TV is biased upward by sampling noise.
    """
    t = np.asarray(target, dtype=np.float64)
    return float(np.sqrt(t * (1 - t) / (2 * math.pi * samples)).sum())


def _check_inputs(p, q, samples, seed) -> tuple[np.ndarray, np.ndarray]:
    p, q = check_distribution(p, "p"), check_distribution(q, "q")
    if p.size != q.size:
        raise UserError(f"p and q must cover the same vocabulary (p has {p.size} entries, q has {q.size})")
    for name, value, least in (("samples", samples, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise UserError(f"{name} must be a whole number, {least} or more (got {shown(value)})")
    limits.SAMPLES.check(samples)
    return p, q


def acceptance_probability(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """min(1, p(x) / q(x)) where q(x) > 0, 0 elsewhere (x is never drafted there): the chance
    the engine's check keeps x, in closed form, to predict what the draws should show."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, np.minimum(1.0, p / q), 0.0)


def _run(
    draft: np.ndarray, p_told: np.ndarray, q_told: np.ndarray, replacement: np.ndarray, samples: int, seed: int
) -> tuple[np.ndarray, float, float]:
    """Draw x ~ draft, keep it as the engine's check does told p_told and q_told, else emit a
    draw from replacement, `samples` times from `seed`: (output frequency per token, share of
    drafts kept, seconds)."""
    start, rng = time.perf_counter(), np.random.default_rng(seed)
    draft_cdf, rep_cdf = _cdf(draft), _cdf(replacement)
    counts = np.zeros(draft.size, dtype=np.int64)
    accepted = 0
    for done in range(0, samples, CHUNK):
        n = min(CHUNK, samples - done)
        x = _draw(rng, draft_cdf, n)
        keep = verify.accepts(rng.random(n), np.take(p_told, x), np.take(q_told, x))  # the engine's check
        kept = np.count_nonzero(keep)
        accepted += kept
        counts += np.bincount(x, weights=keep, minlength=draft.size).astype(np.int64)  # whole counts, exact
        counts += np.bincount(_draw(rng, rep_cdf, n - kept), minlength=draft.size)
    return counts / samples, accepted / samples, time.perf_counter() - start


def _cdf(dist: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(dist)
    return cdf / cdf[-1]  # last entry exactly 1, so a uniform in [0, 1) always lands on a token


def _draw(rng: np.random.Generator, cdf: np.ndarray, n: int) -> np.ndarray:
    # Inverse-CDF sampling; side="right" skips zero-probability tokens (their cdf step is empty).
    return np.searchsorted(cdf, rng.random(n), side="right")


def z_scores(error, se) -> np.ndarray:
    """error / se, where a zero standard error (probability 0 or 1) allows no error at all."""
    error, se = np.asarray(error, dtype=np.float64), np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, error / se, np.where(error > 0, np.inf, 0.0))
