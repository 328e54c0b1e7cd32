"""Predicted against measured: the formula's speedup beside what the run did, and why they differ.

The formula (`specviz.theory`) assumes acceptances are independent with probability alpha
and that a verify pass over k+1 tokens costs what a one-token pass costs (T). T is the
one-token target pass measured when the pair loaded (the trace's `plain_ms_per_token`), so
every speedup here is against the same plain-decoding speed the CLI, the API and the bench
report; a plain run of the same prompt, when there is one, is shown beside it. Each
assumption that did not hold becomes a sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from specviz import theory
from specviz.run_stats import rounds_of
from specviz.cost_model import CostModel
from specviz.events import Event, RoundEvent, RunSummary
from specviz.settings import MAX_K
from specviz.viz.live_stats import live_stats
from specviz.viz.text import panel_html, paragraphs_html, table_html

VERIFY_COST_TOLERANCE = 1.15  # V above this many T counts as "a verify pass is not free"
TOKENS_TOLERANCE = 0.10  # measured tokens per round this far from predicted is worth a word
OVERHEAD_SHARE = 0.10  # time outside model passes above this share of wall time is worth a word


@dataclass
class Prediction:
    alpha: float  # measured mean overlap
    k: int  # the run's k (a fixed k, else the mean drafted per round, rounded)
    target_ms: float  # T: one one-token target pass
    draft_ms: float  # D: one drafted token
    verify_ms: float  # V: the run's mean verify pass (over about k+1 tokens)
    target_ms_source: str  # where T came from, in words
    predicted_tokens_per_round: float
    measured_tokens_per_round: float
    predicted_speedup: float  # the formula, verify costing T
    predicted_speedup_measured_cost: float  # the formula with V in place of T for the verify pass
    measured_speedup: float | None  # against T per token
    measured_basis: str  # what the measured speedup is relative to
    plain_run_speedup: float | None  # against a measured plain run of the same prompt, when there is one
    plain_run_tokens_per_s: float | None
    best_k: int
    best_k_speedup: float
    break_even_alpha: float
    overhead_share: float  # share of wall time outside draft and verify passes


def predict(
    summary: RunSummary,
    events: Iterable[Event],
    k: int | None = None,
    plain: RunSummary | None = None,
    cost: CostModel | None = None,
) -> Prediction | None:
    """Predicted and measured numbers for a speculative run.

    T (one one-token target pass) is the run's `plain_ms_per_token` (the cost model measured
    at load), else a plain run's mean pass; never the run's own verify passes, which cover
    several tokens. `cost` (the trace's cost model, `cost_model.recorded`) prices the verify
    pass over k+1 tokens; without it the run's mean verify pass does. None when no T is known (a
    trace recorded without a cost model and no plain run to compare with).
    """
    events = list(events)
    rounds = rounds_of(events)
    stats = live_stats(rounds)
    alpha = summary.mean_overlap if summary.mean_overlap > 0 else stats.mean_overlap
    alpha = float(np.clip(alpha, 0.0, 1.0))
    k, v = _k_and_verify(rounds, k, summary, cost)
    known = _one_token_pass(summary, plain)
    if known is None:
        return None
    t, source = known
    drafted = sum(len(r.drafted) for r in rounds)
    d = summary.draft_ms if summary.draft_ms > 0 else (stats.draft_ms / drafted if drafted else 0.0)
    at_k = CostModel({1: v}, d) if v > 0 else None  # a flat curve at V(k+1): the round at k
    tpr = float(theory.tokens_per_round(alpha, k))
    measured_tpr = summary.tokens_per_round or stats.tokens_per_round
    tokens_per_s = summary.tokens_per_s or stats.tokens_per_s
    measured = tokens_per_s * t / 1000 if tokens_per_s > 0 else None
    plain_run = (
        tokens_per_s / plain.tokens_per_s if plain is not None and plain.tokens_per_s > 0 and tokens_per_s > 0 else None
    )
    bk, bs = theory.best_k(alpha, t, d, k_max=MAX_K)
    wall_ms = (summary.wall_s or stats.elapsed_s) * 1000
    model_ms = stats.draft_ms + stats.verify_ms
    return Prediction(
        alpha=alpha,
        k=k,
        target_ms=t,
        draft_ms=d,
        verify_ms=v,
        target_ms_source=source,
        predicted_tokens_per_round=tpr,
        measured_tokens_per_round=measured_tpr,
        predicted_speedup=float(theory.speedup(alpha, k, t, d)),
        predicted_speedup_measured_cost=tpr * t / at_k.round_ms(k) if at_k else float("nan"),
        measured_speedup=measured,
        measured_basis=f"{1000 / t:.2f} tokens/s, one {t:.0f} ms pass per token" if measured else "",
        plain_run_speedup=plain_run,
        plain_run_tokens_per_s=plain.tokens_per_s if plain is not None and plain.tokens_per_s > 0 else None,
        best_k=bk,
        best_k_speedup=bs,
        break_even_alpha=float(theory.break_even_alpha(k, t, d)),
        overhead_share=max(0.0, 1 - model_ms / wall_ms) if wall_ms > 0 else 0.0,
    )


def _k_and_verify(
    rounds: list[RoundEvent], k: int | None, summary: RunSummary, cost: CostModel | None
) -> tuple[int, float]:
    """The run's k (given, else the mean drafted per round, rounded) and V, its verify pass
    over k+1 tokens: from the cost model where the trace has one, else the run's mean."""
    # From the rounds that drafted: a round of none (the first token, which the prompt's
    # prefill gives, or one where no draft paid) verifies no draft.
    drafting = [r for r in rounds if r.drafted] or rounds
    if k is None:
        k = max(1, round(float(np.mean([r.k for r in drafting])))) if drafting else 1
    if cost is not None:
        return k, cost.verify_ms(k + 1)
    return k, float(np.mean([r.verify_ms for r in drafting])) if drafting else summary.target_ms


def _one_token_pass(summary: RunSummary, plain: RunSummary | None) -> tuple[float, str] | None:
    """T and where it came from: the pass measured at load, else a plain run's mean pass."""
    if summary.plain_ms_per_token > 0:
        return summary.plain_ms_per_token, "one-token pass measured at load"
    if plain is not None and plain.target_ms > 0:
        return plain.target_ms, "the plain run's mean pass"
    return None


def gap_explanation(pred: Prediction) -> list[str]:
    """Sentences on why the measured speedup differs from the formula's, strongest cause first."""
    out = []
    if pred.verify_ms > VERIFY_COST_TOLERANCE * pred.target_ms:
        out.append(
            f"A verify pass over {pred.k + 1} tokens costs {pred.verify_ms:.0f} ms, {pred.verify_ms / pred.target_ms:.1f}\u00d7 "
            f"a one-token pass ({pred.target_ms:.0f} ms). The formula assumes it costs the same; with the measured cost it "
            f"predicts {pred.predicted_speedup_measured_cost:.2f}\u00d7 instead of {pred.predicted_speedup:.2f}\u00d7."
        )
    rel = (
        pred.measured_tokens_per_round / pred.predicted_tokens_per_round - 1
        if pred.predicted_tokens_per_round > 0
        else 0
    )
    if abs(rel) > TOKENS_TOLERANCE:
        fewer = rel < 0
        why = (
            "acceptances are not independent, and hard stretches of text reject early in the draft"
            if fewer
            else "easy stretches (boilerplate, repeated code) accept whole drafts in a row"
        )
        out.append(
            f"Rounds gave {pred.measured_tokens_per_round:.2f} tokens, {'fewer' if fewer else 'more'} than the "
            f"{pred.predicted_tokens_per_round:.2f} that \u03b1 = {pred.alpha:.2f} predicts: {why}."
        )
    if pred.overhead_share > OVERHEAD_SHARE:
        out.append(
            f"{pred.overhead_share:.0%} of the wall time went outside the model passes (sampling, cache bookkeeping, Python), which the formula ignores."
        )
    if np.isfinite(pred.break_even_alpha) and pred.alpha < pred.break_even_alpha:
        out.append(
            f"\u03b1 = {pred.alpha:.2f} is below the break-even {pred.break_even_alpha:.2f} for k = {pred.k}: drafting costs more than it saves."
        )
    elif not np.isfinite(pred.break_even_alpha):
        out.append(
            f"A drafted token ({pred.draft_ms:.0f} ms) costs more than a target pass ({pred.target_ms:.0f} ms): no \u03b1 makes drafting pay."
        )
    if pred.best_k != pred.k:
        out.append(
            f"With these costs the formula's best k is {pred.best_k} ({pred.best_k_speedup:.2f}\u00d7), not {pred.k}."
        )
    if pred.measured_speedup is not None and not out:
        out.append("The formula's assumptions held well for this run.")
    return out


def prediction_html(pred: Prediction) -> str:
    """A predicted-vs-measured table and the explanation of the gap."""

    def x(v: float | None) -> str:
        return "\u2014" if v is None or not np.isfinite(v) else f"{v:.2f}\u00d7"

    rows = [
        ("tokens per round", f"{pred.predicted_tokens_per_round:.2f}", f"{pred.measured_tokens_per_round:.2f}"),
        ("speedup over plain decoding", x(pred.predicted_speedup), x(pred.measured_speedup)),
        ("speedup, measured verify cost", x(pred.predicted_speedup_measured_cost), ""),
    ]
    if pred.plain_run_speedup is not None:
        rows.append(
            (f"speedup over the plain run ({pred.plain_run_tokens_per_s:.2f} tokens/s)", "", x(pred.plain_run_speedup))
        )
    inputs = (
        f"From \u03b1 = {pred.alpha:.2f} (mean overlap), k = {pred.k}, T = {pred.target_ms:.0f} ms per target pass "
        f"({pred.target_ms_source}), D = {pred.draft_ms:.0f} ms per drafted token, V = {pred.verify_ms:.0f} ms per "
        f"verify pass over {pred.k + 1} tokens"
        + (f"; measured speedup against plain decoding at {pred.measured_basis}." if pred.measured_basis else ".")
    )
    table = table_html(["", "predicted", "measured"], rows)
    why = paragraphs_html(gap_explanation(pred))
    return panel_html(paragraphs_html([inputs], "sv-muted"), table, why)
