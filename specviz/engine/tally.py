"""Running counts of one run, turned into its RunSummary at any moment."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specviz import run_stats
from specviz.events import RunSummary


@dataclass
class Tally:
    new_tokens: int = 0
    rounds: int = 0
    # passes that gave tokens: the prompt's prefill (the first token), then one per round or step
    target_passes: int = 0
    draft_passes: int = 0
    drafted: int = 0  # drafted tokens the target tested
    accepted: int = 0
    overlap_sum: float = 0.0  # over tested positions
    target_ms: float = 0.0  # summed over target passes
    draft_ms: float = 0.0  # summed over rounds
    draft_tokens: int = 0  # every drafted token, tested or not (D = draft_ms / draft_tokens)
    untimed_passes: int = 0  # the prefill's: a pass over the whole prompt is no per-token cost
    forced: int = 0  # tokens the output format forced that the target tested (not in `drafted`)
    forced_accepted: int = 0

    def count_first(self, new: int) -> None:
        """The first token, from the prompt's prefill: a target pass and a round (of no drafts),
        left out of the mean pass time."""
        self.new_tokens += new
        self.rounds += 1
        self.target_passes += 1
        self.untimed_passes += 1

    def count_round(
        self,
        *,
        new: int,
        target_ms: float,
        tested: int = 0,
        accepted: int = 0,
        overlap: Sequence[float] = (),
        draft_ms: float = 0.0,
        draft_passes: int = 0,
        draft_tokens: int = 0,
        forced: tuple[int, int] = (0, 0),
    ) -> None:
        """One round: one target pass, `new` tokens out of it (a plain step drafted nothing);
        `forced`: the output format's forced tokens tested and accepted."""
        self.new_tokens += new
        self.rounds += 1
        self.target_passes += 1
        self.draft_passes += draft_passes
        self.drafted += tested
        self.accepted += accepted
        self.overlap_sum += sum(overlap)
        self.target_ms += target_ms
        self.draft_ms += draft_ms
        self.draft_tokens += draft_tokens
        self.forced += forced[0]
        self.forced_accepted += forced[1]

    def summary(
        self, *, wall_s: float, load_s: float, stop_reason: str, policy: str, plain_ms_per_token: float
    ) -> RunSummary:
        tokens_per_s = run_stats.tokens_per_s(self.new_tokens, wall_s)
        return RunSummary(
            new_tokens=self.new_tokens,
            rounds=self.rounds,
            target_passes=self.target_passes,
            draft_passes=self.draft_passes,
            drafted=self.drafted,
            accepted=self.accepted,
            acceptance_rate=run_stats.acceptance(self.accepted, self.drafted),
            mean_overlap=run_stats.mean_overlap(self.overlap_sum, self.drafted),
            tokens_per_round=run_stats.tokens_per_round(self.new_tokens, self.rounds),
            wall_s=wall_s,
            tokens_per_s=tokens_per_s,
            target_ms=_ratio(self.target_ms, self.target_passes - self.untimed_passes),
            draft_ms=_ratio(self.draft_ms, self.draft_tokens),
            load_s=load_s,
            stop_reason=stop_reason,
            policy=policy,
            plain_ms_per_token=plain_ms_per_token,
            speedup_vs_plain=tokens_per_s * plain_ms_per_token / 1000,
            forced=self.forced,
            forced_accepted=self.forced_accepted,
        )


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0
