"""What an engine's counts (`metrics.Counts`) mean for speed, with a cost model said aloud.

A step that drafts k tokens (the counts' mean) costs k D + V(k + 1) (`CostModel.round_ms`)
and yields the mean acceptance length L of tokens; plain decoding pays T = V(1) a token. So
drafting runs at L T / (k D + V(k + 1)) times plain decoding, the flat-T formula of the
Theory tab with V measured instead of taken as T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from specviz.cost_model import CostModel
from specviz.errors import UserError, shown
from specviz.settings import MAX_K
from specviz.workshop.production.metrics import Counts

# Within this much of 1x, drafting neither helps nor costs anything worth a verdict.
EVEN = 0.05


def typed_cost(target_ms: float, draft_ms: float = 0.0, verify_ms: float | None = None) -> CostModel:
    """A cost model typed in: T, D, and one pass over k + 1 tokens (default T: a GPU's flat
    curve, where verifying a few tokens costs what one does)."""
    for name, v in (("T", target_ms), ("D", draft_ms)) + (
        (("the verify pass", verify_ms),) if verify_ms is not None else ()
    ):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise UserError(f"{name} must be a finite number of ms, 0 or more (got {shown(v)})")
    if target_ms <= 0:
        raise UserError("T (a one-token pass) must be above 0 ms")
    if verify_ms is not None and verify_ms <= 0:
        raise UserError("a verify pass must cost above 0 ms")
    v = target_ms if verify_ms is None else verify_ms
    # One pass over 2 tokens or more costs v: flat from 2 to the largest k and beyond.
    return CostModel(
        {1: target_ms, 2: v, MAX_K + 1: v},
        draft_ms,
        source=f"typed in: T = {target_ms:g} ms, D = {draft_ms:g} ms, a verify pass {v:g} ms",
    )


def measured_cost(cost_model: CostModel, where: str) -> CostModel:
    """The cost model measured on a loaded pair, its source said in words."""
    t, d = cost_model.target, cost_model.draft
    return replace(cost_model, source=f"measured on {where}: T = {t:.1f} ms, D = {d:.1f} ms, V(n) as timed")


def cost_of(
    *, target_ms: float | None = None, draft_ms: float = 0.0, verify_ms: float | None = None, pair: str | None = None
) -> CostModel | None:
    """The command line's cost: typed in, or the named pair's measured on this machine."""
    if target_ms is not None:
        return typed_cost(target_ms, draft_ms, verify_ms)
    if pair is None:
        return None
    from specviz.costs.measure import for_pair
    from specviz.engine.load import load

    loaded = load(pair)
    return measured_cost(for_pair(loaded), f"{loaded.name} ({loaded.runtime}, this machine)")


@dataclass
class Judgement:
    counts: Counts
    cost: CostModel | None
    speedup: float | None
    verdict: str

    def to_dict(self) -> dict:
        return {
            **self.counts.to_dict(),
            "cost_model": self.cost.source if self.cost else None,
            "predicted_speedup": self.speedup,
            "verdict": self.verdict,
        }

    def lines(self) -> list[str]:
        c = self.counts
        head = f"{c.engine} ({c.source}{', ' + c.model if c.model else ''})"
        out = [head]
        if c.steps is not None:
            out.append(f"  steps that drafted: {c.steps}")
        if c.passes is not None:
            out.append(f"  target passes: {c.passes}")
        if c.draft_tokens is not None:
            out.append(
                f"  drafted tokens: {c.draft_tokens}, accepted: {c.accepted}"
                + (f" ({c.acceptance_rate:.3f})" if c.acceptance_rate is not None else "")
            )
        else:
            out.append(f"  accepted drafted tokens: {c.accepted}")
        if c.mean_length_with_bonus is not None:
            out.append(
                f"  mean acceptance length: {c.mean_length_with_bonus:.3f} with the bonus token, "
                f"{c.mean_length_without_bonus:.3f} without"
            )
        if c.unconditional is not None:
            out.append("  acceptance by position (unconditional): " + ", ".join(f"{r:.3f}" for r in c.unconditional))
            out.append("  acceptance by position (conditional):   " + ", ".join(f"{r:.3f}" for r in c.conditional))
        out += [f"  note: {n}" for n in c.notes]
        if self.cost is not None:
            out.append(f"  cost model: {self.cost.source}")
        out.append(f"  {self.verdict}")
        return out


def judge(c: Counts, cost: CostModel | None) -> Judgement:
    """The counts, the speedup they predict under `cost`, and a verdict in words."""
    length, k = c.mean_length_with_bonus, c.k
    if cost is None:
        return Judgement(
            c,
            None,
            None,
            "No cost model: give T and D (--target-ms, --draft-ms) or a pair (--pair) to predict the speedup.",
        )
    if length is None or k is None:
        return Judgement(c, cost, None, "These counts lack the steps or the drafted tokens a speedup needs.")
    step_ms = cost.round_ms(k)  # a mean k: V between the whole sizes on either side of k + 1
    speed = length * cost.target / step_ms
    because = (
        f"each step yields {length:.2f} tokens for {step_ms / cost.target:.2f} one-token passes "
        f"(k = {k:.2f} drafts at {cost.draft:.1f} ms and a pass over k + 1 tokens at {cost.verify_ms(k + 1):.1f} ms)"
    )
    does = "helps" if speed > 1 + EVEN else "costs you" if speed < 1 - EVEN else "breaks even"
    return Judgement(c, cost, speed, f"This drafter {does}: {speed:.2f}x plain decoding, because {because}.")
