"""Why a finished run went as fast as it did, in pass costs: how often it speculated, and what
a guess must be worth to pay for its place in the pass on this runtime. Shown under the
stats when a run fell short of plain decoding or stood aside from speculating in most
rounds, so a user is not left to guess why a method did not pay (the cost-aware policies
stop speculating where drafting cannot pay, and a draft-free method's guesses are often too
weak to pay on a runtime whose larger passes cost several one-token passes). A suffix run's
note also tells one of its rounds in the Round inspector's words: what matched, and how the
round was sized from the copy's evidence and the pass costs; a cost-aware run that ended
decoding plainly says from which round and why (`policy_words`).

    speculation_note_html(trace)   "" when there is nothing to say, else one paragraph
"""

from __future__ import annotations

from specviz.run_stats import rounds_of
from specviz.cost_model import CostModel, recorded
from specviz.events import RoundEvent, Trace
from specviz.viz.policy_words import stood_aside
from specviz.viz.text import esc, plural
from specviz.choices import COST_AWARE, SPECULATIVE, SUFFIX

# Below this share of plain decoding's speed, or speculating in fewer than this share of
# its rounds, a run gets the note.
SHORT_OF_PLAIN = 0.95
RARELY = 0.5
# A run whose target passes took this many times what the same passes cost at load ran on a
# busier machine than the load-time plain speed it is compared with: the note says so.
BUSIER = 1.2


def pass_tokens(event: RoundEvent) -> int:
    """Tokens in the round's target pass: the next token's position and every drafted token
    (a tree's nodes and the tokens that rode with them)."""
    if event.tree:
        return 1 + (event.source.ride if event.source is not None else 0) + len(event.tree)
    return 1 + len(event.drafted)


def slowdown(rounds: list[RoundEvent], cost: CostModel) -> float:
    """The rounds' measured target-pass time over what the load-time V(n) gives for the same
    passes (0 where there is nothing to compare)."""
    predicted = sum(cost.verify_ms(pass_tokens(e)) for e in rounds)
    return sum(e.verify_ms for e in rounds) / predicted if predicted > 0 else 0.0


def speculated(event: RoundEvent) -> bool:
    """Whether the round's pass verified anything beyond the next token, or carried a window."""
    return bool(event.drafted) or bool(event.source is not None and event.source.window_on)


def speculation_note_html(trace: Trace | None) -> str:
    if trace is None or trace.mode != SPECULATIVE or not trace.summary.stop_reason:
        return ""
    rounds = rounds_of(trace.events)[1:]  # after the prefill's token
    cost = recorded(trace.meta)
    if not rounds or cost is None:
        return ""
    used = sum(speculated(e) for e in rounds)
    speedup = trace.summary.speedup_vs_plain
    short = 0 < speedup < SHORT_OF_PLAIN
    if not short and used >= RARELY * len(rounds):
        return ""
    v1, v2, v8 = cost.verify_ms(1), cost.verify_ms(2), cost.verify_ms(8)
    method = (trace.meta or {}).get("drafter") or trace.settings.get("drafter", "the drafter")
    parts = [f"{esc(str(method).capitalize())} speculated in {used} of {len(rounds)} rounds"]
    if speedup > 0:
        parts.append(f"and ran at {speedup:.2f}\u00d7 plain decoding" + (" (below plain)" if short else ""))
    costs = (
        f"On this runtime a pass over 2 tokens costs {v2 / v1:.2f} one-token passes ({v2:.0f} against {v1:.0f} ms) "
        f"and a pass over 8 costs {v8 / v1:.2f}: a guessed token pays for its place only where its chance of "
        f"being accepted is above about {max(0.0, v2 / v1 - 1):.0%}, and a round of 7 guesses only where they "
        f"add {max(0.0, v8 / v1 - 1):.1f} accepted tokens on average."
    )
    if trace.summary.policy == COST_AWARE:
        why = stood_aside(rounds, trace.meta, int(trace.settings.get("k") or 0)) or (
            "Where its guesses could not clear that, the cost-aware policy kept the round to the next token, "
            "as plain decoding does, and tried again as its estimates recovered."
        )
    else:
        why = (
            f"The {esc(trace.summary.policy or 'chosen')} policy verifies what was drafted whether it pays or not; "
            "the cost-aware policy stands aside where it cannot."
        )
    busier = slowdown(rounds, cost)
    if busier > BUSIER:
        why += (
            f" The target's passes in this run took {busier:.1f}\u00d7 what the same passes cost when the pair "
            "loaded: the machine was busier than then, so plain decoding at its load-time speed is a high bar; "
            "Side by side races both under the same conditions."
        )
    return (
        f'<p class="sv-speculation-note" data-speculated="{used}" data-rounds="{len(rounds)}" '
        f'data-slowdown="{busier:.2f}">{" ".join(parts)}. {costs} {why}{_sized_round(rounds)}</p>'
    )


def _sized_round(rounds: list[RoundEvent]) -> str:
    """A copying drafter's round in the Round inspector's own words (the note its source
    carries on how the round was sized): the last round that verified guesses, else the last
    sized one."""
    sized = [e for e in rounds if e.source is not None and e.source.note and e.source.method == SUFFIX]
    if not sized:
        return ""
    e = next((e for e in reversed(sized) if e.drafted and e.source.matched), sized[-1])
    m, matched = len(e.source.matched), "".join(e.source.matched)
    where = (
        f"the context's last {plural(m, 'token')} ({esc(matched)}) occurred {plural(e.source.occurrences, 'time')} "
        "earlier. "
        if m
        else ""
    )
    return f" Round {e.index}, as the Round inspector tells it: {where}{esc(e.source.note)}"
