"""Acceptance statistics of a run by draft position, against the geometric model, and the
draft length each round should have used in hindsight.

A leaf: plain data in (the events of specviz.events, a cost model as a dict), numbers out.
The engine puts `acceptance_by_position(events)` and `hindsight_k(events, cost_model)` in a
run's summary; the labs tab draws the rest.

Two definitions of acceptance at draft position i (1-based) are in use, and they differ:

- conditional: accepted at i / reached i, where a round reaches i when every draft before
  i was accepted and the target judged the draft at i. It answers "once the draft got this
  far, how often was the next token right?". The geometric model (each draft accepted
  independently with probability alpha) predicts alpha at every position.
- unconditional: accepted at i / rounds that drafted at least i tokens. This is what vLLM
  logs as "Per-position acceptance rate" (vllm/v1/spec_decode/metrics.py: accepted tokens
  per position / number of drafts, its drafts all num_speculative_tokens long) and what
  llama.cpp's server logs as "acceptance rate per position" (accepted per position / draft
  verification steps). The model predicts alpha^i: position i needs i acceptances in a row.

alpha is the run's measured acceptance, accepted / judged drafts: under the model that is
the maximum-likelihood estimate, since every judged draft is one trial.

Mean accepted length, per round that drafted at least one token:

- with the bonus token: 1 + accepted / rounds, the tokens one target pass yields. vLLM's
  "Mean acceptance length" is this (metrics.py: "Conventionally, mean acceptance length
  includes the bonus token", 1 + num_accepted_tokens / num_drafts, since vLLM PR #17908),
  and so is llama.cpp's "mean acceptance length" (server: 1 + n_draft_accepted /
  n_draft_verif_steps; common/speculative.cpp's "#mean acc len", since llama.cpp PR #24536).
- without it: accepted / rounds, drafts kept per round (0..k), as vLLM's v1 metrics
  reported before PR #17908, and what specviz's histogram of accepted lengths counts.

Rounds cut short by the end of the run (an accepted end-of-text token or the token limit:
no token emitted) leave their later drafts unjudged; those drafts count nowhere, and the
round is left out of the histogram and the mean lengths. Rounds that drafted nothing (a
cost-aware policy may decode a round plainly) are left out of all of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from specviz import theory
from specviz.cost_model import CostModel
from specviz.events import Event, RoundEvent
from specviz.settings import MAX_K

# A measured rate further than this many binomial standard errors from the model's is
# called a departure; closer ones are within the noise of the sample.
DEPARTURE_SE = 2.0


# --- the run's rates ---------------------------------------------------------------------
# One definition each, from counts: the engine's RunSummary takes them from its running
# tally, the live stats from the events so far (shown while a run goes, before any summary).


def acceptance(accepted: int, judged: int) -> float:
    """The measured acceptance: accepted over judged drafts (0 before any was judged)."""
    return accepted / judged if judged else 0.0


def mean_overlap(overlap_sum: float, judged: int) -> float:
    """The mean of sum min(p, q) over judged positions: the acceptance the draft's q and the
    target's p lead to expect."""
    return overlap_sum / judged if judged else 0.0


def tokens_per_round(tokens: int, rounds: int) -> float:
    """New tokens per round: per target pass, the prefill's first round included."""
    return tokens / rounds if rounds else 0.0


def tokens_per_s(tokens: int, seconds: float) -> float:
    return tokens / seconds if seconds > 0 else 0.0


def rounds_of(events: Iterable[Event]) -> list[RoundEvent]:
    return [e for e in events if isinstance(e, RoundEvent)]


def judged(r: RoundEvent) -> int:
    """Drafts the target judged in the round: the accepted ones plus a rejection, if any."""
    return sum(d.decision != "unchecked" for d in r.drafted)


def finished(r: RoundEvent) -> bool:
    """Whether the round ran to its end (the target emitted its token)."""
    return r.emitted is not None


@dataclass
class PositionStats:
    """Counts by draft position i = 1..K (index i - 1) and the rates built from them."""

    drafted: np.ndarray  # rounds that drafted at least i tokens (cut-short rounds: judged ones only)
    reached: np.ndarray  # rounds where every draft before i was accepted and i was judged
    accepted: np.ndarray  # rounds whose draft at i was accepted
    alpha: float  # the run's measured acceptance: accepted / judged over all positions

    @property
    def positions(self) -> np.ndarray:
        return np.arange(1, len(self.drafted) + 1)

    @property
    def conditional(self) -> np.ndarray:
        """accepted / reached at each position (nan where no round reached it)."""
        return _ratio(self.accepted, self.reached)

    @property
    def unconditional(self) -> np.ndarray:
        """accepted / rounds that drafted at least i tokens (vLLM's and llama.cpp's rate)."""
        return _ratio(self.accepted, self.drafted)

    @property
    def predicted_conditional(self) -> np.ndarray:
        return np.full(len(self.drafted), self.alpha)

    @property
    def predicted_unconditional(self) -> np.ndarray:
        return self.alpha**self.positions


def position_stats(events: Iterable[Event]) -> PositionStats:
    rounds = rounds_of(events)
    k = max((len(r.drafted) for r in rounds), default=0)
    drafted, reached, accepted = np.zeros(k, int), np.zeros(k, int), np.zeros(k, int)
    for r in rounds:
        counted = len(r.drafted) if finished(r) else judged(r)
        drafted[:counted] += 1
        for i, d in enumerate(r.drafted):
            if d.decision == "unchecked":
                break
            reached[i] += 1
            accepted[i] += d.decision == "accepted"
    total = int(reached.sum())
    return PositionStats(drafted, reached, accepted, acceptance(int(accepted.sum()), total))


def acceptance_by_position(events: Iterable[Event]) -> list[float]:
    """The conditional acceptance (accepted / reached) at draft positions 1, 2, ... up to the
    last position any round reached. A round reaches i + 1 only by accepting i, so no
    position before the last reached one is empty: every entry is a finite rate."""
    s = position_stats(events)
    return [float(x) for x in s.conditional[: np.count_nonzero(s.reached)]]


# --- accepted lengths per round -------------------------------------------------------------


@dataclass
class LengthStats:
    """Drafts accepted per finished round that drafted something, against the model."""

    accepted: np.ndarray  # per round: drafts accepted
    k: np.ndarray  # per round: drafts proposed
    alpha: float

    @property
    def rounds(self) -> int:
        return len(self.accepted)

    @property
    def histogram(self) -> np.ndarray:
        """Rounds with 0, 1, ..., max k accepted drafts."""
        return np.bincount(self.accepted, minlength=int(self.k.max(initial=0)) + 1)

    @property
    def predicted_histogram(self) -> np.ndarray:
        """Expected rounds with 0..max k accepted: a truncated geometric per round, summed."""
        expected = np.zeros(int(self.k.max(initial=0)) + 1)
        for k, count in zip(*np.unique(self.k, return_counts=True)):
            expected[: k + 1] += count * theory.accepted_length_distribution(self.alpha, int(k))
        return expected

    @property
    def mean_without_bonus(self) -> float:
        return float(self.accepted.mean()) if self.rounds else 0.0

    @property
    def mean_with_bonus(self) -> float:
        """vLLM's and llama.cpp's "mean acceptance length": accepted drafts plus the
        target's own token, per round."""
        return 1.0 + self.mean_without_bonus if self.rounds else 0.0

    @property
    def predicted_mean_without_bonus(self) -> float:
        """Expected accepted drafts per round, alpha (1 - alpha^k) / (1 - alpha) averaged over
        the rounds' k (tokens_per_round less the target's token)."""
        if not self.rounds:
            return 0.0
        return float(np.mean(np.asarray(theory.tokens_per_round(self.alpha, self.k)) - 1))


def length_stats(events: Iterable[Event], alpha: float | None = None) -> LengthStats:
    """alpha defaults to the run's measured acceptance (accepted / judged)."""
    events = list(events)
    rounds = [r for r in rounds_of(events) if finished(r) and r.drafted]
    if alpha is None:
        alpha = position_stats(events).alpha
    return LengthStats(
        np.array([r.accepted for r in rounds], int), np.array([len(r.drafted) for r in rounds], int), alpha
    )


# --- the run's counts under an engine's names ------------------------------------------------


def request_metrics(events: Iterable[Event]) -> dict:
    """The run's speculative counts under vLLM's per-request names (`--per-request-spec-decode-
    metrics summary`, vLLM PR #48915: a response's `metrics.speculative_decoding`), so that a
    specviz run and an engine's request can be laid side by side. A step is a finished
    round that drafted something; the histogram counts steps by drafts accepted (0..the
    longest draft, `num_spec_tokens`); draft tokens are every token those steps proposed,
    judged or not, as vLLM counts them; the mean acceptance length counts the target's own
    token, as vLLM's does."""
    lengths = length_stats(events)
    steps = lengths.rounds
    drafted = int(lengths.k.sum())
    accepted = int(lengths.accepted.sum())
    return {
        "mean_acceptance_length": lengths.mean_with_bonus,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": [int(c) for c in lengths.histogram] if steps else [],
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": int(lengths.k.max(initial=0)),
    }


# --- where the run departs from the model ----------------------------------------------------


@dataclass
class Departure:
    position: int
    measured: float
    predicted: float
    n: int
    z: float  # (measured - predicted) / binomial standard error


def departures(stats: PositionStats) -> list[Departure]:
    """Positions whose conditional rate is more than DEPARTURE_SE standard errors from alpha."""
    out = []
    a = stats.alpha
    for i, (acc, n) in enumerate(zip(stats.accepted, stats.reached)):
        if n == 0 or not 0 < a < 1:
            continue
        z = (acc / n - a) / math.sqrt(a * (1 - a) / n)
        if abs(z) > DEPARTURE_SE:
            out.append(Departure(i + 1, float(acc / n), a, int(n), float(z)))
    return out


def departure_words(events: Iterable[Event]) -> list[str]:
    """Sentences on where the run departs from the geometric model, or that it does not."""
    events = list(events)
    ps = position_stats(events)
    ls = length_stats(events, ps.alpha)
    if ps.reached.sum() == 0 or ls.rounds == 0:
        return ["No drafts were judged, so there is nothing to compare with the model."]
    a = ps.alpha
    words = []
    if a in (0.0, 1.0):
        words.append(
            f"Every judged draft was {'accepted' if a == 1 else 'rejected'} (\u03b1 = {a:.0%}): "
            "the model has nothing left to predict."
        )
        return words
    found = departures(ps)
    for d in found:
        trend = "more" if d.z > 0 else "less"
        words.append(
            f"Position {d.position}: {d.measured:.0%} of the {d.n} drafts that got there were accepted, {trend} often than "
            f"the model's {d.predicted:.0%} ({abs(d.z):.1f} standard errors)."
        )
    rising = [d for d in found if d.position > 1 and d.z > 0]
    falling = [d for d in found if d.position > 1 and d.z < 0]
    if rising:
        words.append(
            "Later positions accept more often than the first: acceptances come in runs (easy stretches of "
            "text, where the draft keeps agreeing), not independently as the model assumes."
        )
    if falling:
        words.append(
            "Later positions accept less often: the draft drifts from the target the further it guesses, so "
            "each token is harder than the one before."
        )
    full, full_expected = int(np.sum(ls.accepted == ls.k)), float(np.sum(a**ls.k))
    words += _rounds_against(
        full, full_expected, ls.rounds, "accepted every draft", "whole drafts kept than independent acceptances give"
    )
    zero, zero_expected = int(ls.histogram[0]), float(ls.predicted_histogram[0])
    words += _rounds_against(
        zero, zero_expected, ls.rounds, "lost their first draft", "rounds that gain nothing from drafting"
    )
    if not words:
        words.append(
            f"Within noise of the geometric model at \u03b1 = {a:.2f}: no position's rate is more than "
            f"{DEPARTURE_SE:g} standard errors from \u03b1, and the accepted lengths (0 to {int(ls.k.max())}) follow "
            "the truncated geometric."
        )
    return words


def _rounds_against(seen: int, expected: float, rounds: int, did: str, meaning: str) -> list[str]:
    """A sentence where `seen` of the `rounds` rounds did something, a binomial count, departs
    from the model's `expected` by more than DEPARTURE_SE standard errors."""
    if expected > 0 and abs(seen - expected) > DEPARTURE_SE * math.sqrt(expected * (1 - expected / rounds)):
        return [
            f"{seen} rounds {did} against {expected:.1f} expected: {'more' if seen > expected else 'fewer'} {meaning}."
        ]
    return []


# --- hindsight k ----------------------------------------------------------------------------


@dataclass
class HindsightRound:
    index: int
    k: int  # the policy's k (the round's recorded k)
    drafted: int
    accepted: int
    best_k: int  # the draft length with the most tokens per ms for what this round accepted
    capped: bool  # every draft accepted (or the run ended in the round): best_k <= its length


@dataclass
class Hindsight:
    """The run with the k each round should have drafted, against the k the policy drafted.

    Speeds are tokens per second from the cost model's costs, so the policy's and the
    hindsight figures are comparable (the measured one also counts what the model leaves
    out: sampling, bookkeeping, noise)."""

    rounds: list[HindsightRound]
    policy_tokens: int
    policy_ms: float
    hindsight_tokens: int
    hindsight_ms: float
    plain_ms_per_token: float  # V(1)
    measured_ms: float  # the rounds' recorded draft + verify time
    best_tokens_per_s: float  # the fastest run any choice of k per round gives (see best_speed)

    @property
    def policy_tokens_per_s(self) -> float:
        return 1000 * self.policy_tokens / self.policy_ms if self.policy_ms else 0.0

    @property
    def hindsight_tokens_per_s(self) -> float:
        return 1000 * self.hindsight_tokens / self.hindsight_ms if self.hindsight_ms else 0.0

    @property
    def measured_tokens_per_s(self) -> float:
        return 1000 * self.policy_tokens / self.measured_ms if self.measured_ms else 0.0

    @property
    def plain_tokens_per_s(self) -> float:
        return 1000 / self.plain_ms_per_token

    @property
    def matched(self) -> int:
        """Rounds whose policy k was already the hindsight k."""
        return sum(r.drafted == r.best_k for r in self.rounds)


def _round_options(r: RoundEvent, cost: CostModel, k_max: int) -> tuple[int, list[tuple[int, int, float]]]:
    """(accepted, [(k', tokens, ms)]) for the draft lengths this round could have used.

    A round with a rejection at a + 1 would have yielded min(k', a) + 1 tokens for any k'.
    A round whose drafts were all accepted says nothing about drafts beyond its length: k'
    stops there. A round that drafted nothing keeps k' = 0 (one plain step), and the round
    the run ended in (no token emitted) keeps its own k: what a shorter draft would have
    led to is past the end of the run. A tree round's k' is its node budget (`_tree_options`)."""
    a, n = r.accepted, len(r.drafted)
    if r.tree:
        return a, _tree_options(r, cost)
    if n == 0:
        return a, [(0, 1, cost.round_ms(0))]
    if not finished(r):
        return a, [(n, r.gained, cost.round_ms(n))]
    last = n if a == n else max(n, k_max)
    return a, [(kk, min(kk, a) + 1, cost.round_ms(kk)) for kk in range(1, last + 1)]


def _tree_options(r: RoundEvent, cost: CostModel) -> list[tuple[int, int, float]]:
    """A tree round's node budgets b = 0..n: the tree's first b nodes (every drafter lists a
    parent before its children and grows best first, so a smaller budget is a prefix), the
    accepted path's nodes among them, and a pass over 1 + ride + b nodes, plus the round's
    drafting where b > 0. Budgets beyond the tree say nothing (its nodes were never drafted);
    the round the run ended in keeps its own."""
    n, ride = len(r.tree), r.source.ride if r.source is not None else 0
    path = [i for i, node in enumerate(r.tree) if node.decision == "accepted"]

    def option(b: int) -> tuple[int, int, float]:
        kept = sum(i < b for i in path)
        return b, kept + 1, cost.verify_ms(1 + ride + b) + (r.draft_ms if b else 0.0)

    if not finished(r):
        return [(n, r.gained, option(n)[2])]
    return [option(b) for b in range(n + 1)]


def hindsight(events: Iterable[Event], cost_model: Mapping, k_max: int = MAX_K) -> Hindsight:
    """For each round, the k' in 1..k_max with the most tokens per ms,
    (min(k', a) + 1) / (k' D + V(k' + 1)), a the drafts it accepted (the smallest k' of a
    tie); then the whole run's speed with those k' (total tokens over total cost) beside
    the policy's and plain decoding's.

    Choosing each round's best ratio is not quite the fastest run: a round's cheap option can
    pull the total down less than a dear one pulls it up. `best_tokens_per_s` is the
    fastest (total tokens / total ms maximised over every choice, by Dinkelbach's method)."""
    cost = CostModel.from_dict(cost_model)
    rounds, options, policy_t, policy_ms, measured_ms, h_t, h_ms = [], [], 0, 0.0, 0.0, 0, 0.0
    for r in rounds_of(events):
        a, opts = _round_options(r, cost, k_max)
        best = max(opts, key=lambda o: (o[1] / o[2], -o[0]))  # the most tokens per ms; ties: the smaller k'
        n = len(r.tree or r.drafted)  # a tree's draft length is its node count
        rounds.append(HindsightRound(r.index, r.k, n, a, best[0], a == n or not finished(r)))
        options.append(opts)
        policy_t += r.gained
        policy_ms += next(o[2] for o in opts if o[0] == n)  # the option the policy took is among the round's
        measured_ms += r.draft_ms + r.verify_ms
        h_t, h_ms = h_t + best[1], h_ms + best[2]
    return Hindsight(rounds, policy_t, policy_ms, h_t, h_ms, cost.target, measured_ms, best_speed(options))


def best_speed(options: list[list[tuple[int, int, float]]]) -> float:
    """max over one option per round of 1000 * sum(tokens) / sum(ms) (Dinkelbach: choose
    each round's max of tokens - rate * ms, update the rate, until it stops rising)."""
    if not options:
        return 0.0
    rate = 0.0
    for _ in range(100):
        picks = [max(opts, key=lambda o: o[1] - rate * o[2]) for opts in options]
        new = sum(p[1] for p in picks) / sum(p[2] for p in picks)
        if new <= rate * (1 + 1e-12):
            break
        rate = new
    return 1000 * rate


def hindsight_k(events: Iterable[Event], cost_model: Mapping | None) -> list[int]:
    """One entry per round: the draft length that round should have used in hindsight (see
    `hindsight`); [] without a cost model (traces recorded before runs carried one)."""
    if not cost_model:
        return []
    return [r.best_k for r in hindsight(events, cost_model).rounds]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)
