"""Why the cost-aware policy drafted nothing in a round, in words: the round's `policy_note`
(`events.POLICY_NOTES`) for the Round inspector and the run's status line, and with the pass
costs the run measured (the trace's `policy_costs`) for the note under a finished run.

    why_plain(event)                  a clause, "" where the round drafted by choice
    stood_aside(rounds, meta, k)      a sentence on the run's last stretch of plain rounds, or ""
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specviz import theory
from specviz.cost_model import BREAK_EVEN_MARGIN, kept
from specviz.events import CATCH_UP, CHECK, DRAFTING_LOST, LOW_ACCEPTANCE, NO_DRAFT_PAYS, RoundEvent

WHY = {
    NO_DRAFT_PAYS: "no draft length can pay on the pass costs this run measures, even if every draft were accepted "
    f"(none gains {BREAK_EVEN_MARGIN:.0%} on plain decoding)",
    LOW_ACCEPTANCE: "at the acceptance seen so far no draft length pays for its pass",
    DRAFTING_LOST: "its rounds that drafted gave fewer tokens per second than its plain ones",
    CATCH_UP: "the draft would first read every token it skipped, more than the rest of the run could repay",
    CHECK: "a check: one token drafted, to see whether drafting pays at the acceptance and the costs of now",
}


def why_plain(event: RoundEvent) -> str:
    return WHY.get(event.policy_note, "")


def stood_aside(rounds: Sequence[RoundEvent], meta: Mapping | None, k_max: int) -> str:
    """From which round the run decoded plainly to its end, and why, with the numbers where no
    draft length could pay; "" where its last round drafted by choice."""
    plain = []
    for e in reversed(rounds):
        if e.policy_note not in WHY:
            break
        plain.append(e)
    reasons = [e for e in plain if e.policy_note != CHECK]
    if not reasons:
        return ""
    first, why = plain[-1], reasons[0].policy_note
    checks = sum(e.policy_note == CHECK for e in plain)
    said = f"From round {first.index} the cost-aware policy decoded plainly: {WHY[why]}"
    cost = kept((meta or {}).get("policy_costs"))
    if why == NO_DRAFT_PAYS and cost is not None and k_max >= 1:
        speed = {k: theory.speedup_with_cost(1.0, k, cost) for k in range(1, k_max + 1)}
        k = max(speed, key=speed.get)
        v1 = cost.verify_ms(1)
        said += (
            f" (a drafted token costs {cost.draft / v1:.2f} of a plain round and a round verifying 2 tokens "
            f"{cost.verify_ms(2) / v1:.2f}; at the best length, k = {k}, a draft the target always accepts makes "
            f"{k + 1} tokens in the time plain decoding makes {(k + 1) / speed[k]:.2f})"
        )
    if checks:
        said += f", checking {'once' if checks == 1 else f'{checks} times'} whether that still held"
    return said + "."
