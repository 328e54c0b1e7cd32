"""The numbers shown beside a run while it goes, computed from its events alone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from specviz import run_stats
from specviz.run_stats import judged, rounds_of
from specviz.events import Event, PlainTokenEvent, RunSummary
from specviz.viz.text import esc


@dataclass
class LiveStats:
    tokens: int = 0
    rounds: int = 0
    checked: int = 0  # drafted tokens the target actually judged (an output format's forced ones apart)
    accepted: int = 0
    forced: int = 0  # tokens an output format forced that the target judged, and of them accepted
    forced_accepted: int = 0
    acceptance: float = 0.0  # accepted / checked: the measured acceptance rate
    mean_overlap: float = 0.0  # mean beta over judged positions: the expected acceptance
    tokens_per_round: float = 0.0
    target_passes: int = 0  # one verify pass per round (plain decoding: one per token)
    target_passes_saved: int = 0  # what plain decoding would have needed, minus the above
    elapsed_s: float = 0.0
    tokens_per_s: float = 0.0
    draft_ms: float = 0.0  # total
    verify_ms: float = 0.0  # total
    plain: bool = False


def live_stats(events: Iterable[Event]) -> LiveStats:
    """Stats of the events so far: works mid-run, after a run and on a replayed trace."""
    events = list(events)
    rounds = rounds_of(events)
    plain = [e for e in events if isinstance(e, PlainTokenEvent)] if not rounds else []
    if plain:
        n, t = len(plain), max(e.t_end_s for e in plain)
        return LiveStats(
            tokens=n,
            target_passes=n,
            elapsed_s=t,
            tokens_per_s=run_stats.tokens_per_s(n, t),
            verify_ms=sum(e.ms for e in plain),
            plain=True,
        )
    s = LiveStats(rounds=len(rounds))
    overlaps = []
    for r in rounds:
        c = judged(r)
        forced = [d.forced for d in r.drafted[:c]]
        s.forced += sum(forced)
        s.forced_accepted += sum(f and d.decision == "accepted" for f, d in zip(forced, r.drafted))
        s.checked += c - sum(forced)
        s.accepted += r.accepted - sum(f and d.decision == "accepted" for f, d in zip(forced, r.drafted))
        overlaps += [p.overlap for p, f in zip(r.positions[:c], forced) if not f]
        s.draft_ms += r.draft_ms
        s.verify_ms += r.verify_ms
    if rounds:
        s.tokens = max(r.new_tokens for r in rounds)
        s.elapsed_s = max(r.t_end_s for r in rounds)
    s.acceptance = run_stats.acceptance(s.accepted, s.checked)
    # positions are recorded only in full traces: the mean is over those there are
    s.mean_overlap = run_stats.mean_overlap(sum(overlaps), len(overlaps))
    s.tokens_per_round = run_stats.tokens_per_round(s.tokens, s.rounds)
    s.target_passes = s.rounds
    s.target_passes_saved = max(0, s.tokens - s.rounds)
    s.tokens_per_s = run_stats.tokens_per_s(s.tokens, s.elapsed_s)
    return s


def _card(value: str, label: str, hint: str) -> str:
    return (
        f'<div class="sv-stat" title="{esc(hint)}"><div class="sv-stat-value">{esc(value)}</div>'
        f'<div class="sv-stat-label">{esc(label)}</div></div>'
    )


def stats_html(stats: LiveStats, summary: RunSummary | None = None) -> str:
    """The live stats as a grid of small cards (each with a tooltip saying what it means).
    With the run's summary, also its speed against plain decoding at the one-token pass
    measured when the pair loaded, and its draft-length policy."""
    cards = [_card(str(stats.tokens), "tokens", "new tokens generated so far")]
    if not stats.plain:
        cards += [
            _card(
                f"{stats.acceptance:.0%}", "acceptance", f"{stats.accepted} of {stats.checked} judged drafts accepted"
            ),
            _card(
                f"{stats.mean_overlap:.2f}",
                "mean overlap",
                "mean of sum min(p, q) over judged positions: the expected acceptance",
            ),
            _card(f"{stats.tokens_per_round:.2f}", "tokens / round", f"{stats.tokens} tokens in {stats.rounds} rounds"),
            _card(
                str(stats.target_passes_saved),
                "target passes saved",
                f"{stats.target_passes} target passes instead of {stats.tokens}",
            ),
        ]
    cards.append(_card(f"{stats.tokens_per_s:.2f}", "tokens / s", f"{stats.tokens} tokens in {stats.elapsed_s:.2f} s"))
    if summary is not None and summary.plain_ms_per_token > 0 and stats.tokens_per_s > 0:
        plain_speed = 1000 / summary.plain_ms_per_token
        speedup = stats.tokens_per_s / plain_speed
        cards.append(
            _card(
                f"{speedup:.2f}\u00d7",
                "vs plain decoding",
                f"{stats.tokens_per_s:.2f} tokens/s against {plain_speed:.2f} tokens/s: one "
                f"{summary.plain_ms_per_token:.0f} ms target pass per token, measured when the pair loaded",
            )
        )
    if summary is not None and summary.policy and not stats.plain:
        cards.append(_card(summary.policy, "draft length", "the draft-length policy: fixed k, heuristic or cost-aware"))
    return f'<div class="specviz-stats">{"".join(cards + _format_cards(stats, summary))}</div>'


def _format_cards(stats: LiveStats, summary: RunSummary | None) -> list[str]:
    """Under an output format: its forced tokens, what its masks cost a token, the answer checked."""
    cards = []
    if stats.forced:
        why = "tokens the output format forced, verified as point masses with no drafting: accepted of judged"
        cards.append(_card(f"{stats.forced_accepted}/{stats.forced}", "forced", why))
    if summary is not None and summary.grammar_ms:
        share = (
            f"; {summary.grammar_ms / summary.target_ms:.1%} of a one-token target pass" if summary.target_ms else ""
        )
        cards.append(_card(f"{summary.grammar_ms:.2f} ms", "grammar / token", f"the masks' cost per new token{share}"))
    if summary is not None and summary.format_check:
        cards.append(_card(summary.format_check.split(":")[0], "output", summary.format_check))
    return cards
