"""The token stream: every token of a run as coloured, hoverable HTML.

Each token is a `<span class="tok tok-OUTCOME">` with `data-round` (the round it came from)
and `data-pos` (its 1-based position in that round's draft), and a `title` tooltip with p, q,
p/q, the uniform draw u and the decision. A round reads left to right as it happened:
accepted drafts, then the rejected draft struck through (and the unchecked drafts after it,
dimmer), then the token the target put in its place; a token an output format forced is also
striped and italic. Styles live in assets/specviz.css.
"""

from __future__ import annotations

from collections.abc import Iterable

from specviz.events import DraftToken, EmittedToken, Event, PlainTokenEvent, RoundEvent
from specviz.viz.text import esc, quoted, token_inner_html


def fmt_prob(x: float | None) -> str:
    """A probability with three decimals, or in scientific notation when it is tiny."""
    if x is None:
        return "\u2014"
    return f"{x:.3f}" if x == 0 or abs(x) >= 0.001 else f"{x:.1e}"


def ratio(p: float, q: float) -> float:
    return p / q if q > 0 else float("inf")


def fmt_ratio(r: float) -> str:
    """p/q with three decimals; tiny ratios in scientific notation, q = 0 as \u221e."""
    return "\u221e" if r == float("inf") else fmt_prob(r)


def round_is_greedy(event: RoundEvent) -> bool:
    """Greedy rounds compare with the target's top choice and draw no u."""
    checked = [d for d in event.drafted if d.decision != "unchecked"]
    return bool(checked) and all(d.u is None for d in checked)


def draft_tooltip(d: DraftToken, event: RoundEvent, pos: int, greedy: bool) -> str:
    head = f"round {event.index} \u00b7 draft token {pos} of {len(event.drafted)} \u00b7 {quoted(d.text)}"
    if d.forced:
        head += "\nforced by the output format: proposed as a point mass (q = 1), no drafting"
    numbers = f"p = {fmt_prob(d.p)} (target)\nq = {fmt_prob(d.q)} (draft)\np/q = {fmt_ratio(ratio(d.p, d.q))}\nu = {fmt_prob(d.u)}"
    if d.decision == "unchecked":
        why = "unchecked: an earlier draft token was rejected, or the run stopped before it"
    elif greedy:
        why = (
            "accepted: matches the target's top choice"
            if d.decision == "accepted"
            else "rejected: the target's top choice differs"
        )
    elif event.tree:  # a tree's tokens were chosen, not sampled: each checked as a point mass
        sign = "<" if d.decision == "accepted" else "\u2265"
        why = f"{d.decision}: u {sign} p', the target's p less the siblings rejected before it"
    elif d.decision == "accepted":
        why = "accepted: u < p/q"
    else:
        why = "rejected: u \u2265 p/q"
    return f"{head}\n{numbers}\n{why}"


def emitted_tooltip(e: EmittedToken, event: RoundEvent, greedy: bool) -> str:
    pos = event.accepted + 1
    head = f"round {event.index} \u00b7 position {pos} \u00b7 {quoted(e.text)}"
    if e.kind == "bonus":
        source = "the target's top choice" if greedy else "drawn from the target's p"
        why = (
            f"bonus: all {len(event.drafted)} drafts accepted, so the same target pass gives one more token ({source})"
        )
    elif greedy:
        why = "replacement: the target's top choice, in place of the rejected draft"
    else:
        why = "replacement: drawn from the residual norm(max(0, p \u2212 q))"
    return f"{head}\np = {fmt_prob(e.p)} (target)\n{why}"


def token_span(text: str, classes: str, tooltip: str, **data: object) -> str:
    """One token as a hoverable `tok` span: its classes, its data-* attributes in the order
    given, and its tooltip (escaped here)."""
    attrs = "".join(f' data-{name}="{value}"' for name, value in data.items())
    return f'<span class="tok {classes}"{attrs} title="{esc(tooltip)}">{token_inner_html(text)}</span>'


def round_tokens_html(event: RoundEvent) -> str:
    """One round's tokens, wrapped in a `sv-round` span (its border marks the round start)."""
    greedy = round_is_greedy(event)
    parts = []
    for pos, d in enumerate(event.drafted, start=1):
        classes = {"accepted": "tok-accepted", "rejected": "tok-rejected"}.get(d.decision, "tok-rejected tok-unchecked")
        classes += " tok-forced" if d.forced else ""
        parts.append(token_span(d.text, classes, draft_tooltip(d, event, pos, greedy), round=event.index, pos=pos))
    e = event.emitted
    if e is not None:
        tooltip = emitted_tooltip(e, event, greedy)
        parts.append(token_span(e.text, f"tok-{e.kind}", tooltip, round=event.index, pos=event.accepted + 1))
    return f'<span class="sv-round" data-round="{event.index}">{"".join(parts)}</span>'


def plain_token_html(event: PlainTokenEvent) -> str:
    tooltip = f"plain decoding \u00b7 token {event.index} \u00b7 {quoted(event.text)}\np = {fmt_prob(event.p)} (target)\n{event.ms:.0f} ms"
    return token_span(event.text, "tok-plain", tooltip, index=event.index)


def tokens_html(events: Iterable[Event], empty: str = "") -> str:
    """The whole token stream as one HTML block, in O(number of tokens).

    Speculative rounds and plain tokens may both appear (each drawn its own way).
    `empty` is shown, escaped, when there is no token yet.
    """
    parts = []
    for ev in events:
        if isinstance(ev, RoundEvent):
            parts.append(round_tokens_html(ev))
        elif isinstance(ev, PlainTokenEvent):
            parts.append(plain_token_html(ev))
    body = "".join(parts) or (f'<span class="sv-empty">{esc(empty)}</span>' if empty else "")
    return f'<div class="specviz-stream">{body}</div>'


_LEGEND = (
    ("tok-accepted", "def", "accepted draft"),
    ("tok-rejected", "foo", "rejected draft (discarded)"),
    ("tok-rejected tok-unchecked", "bar", "unchecked draft (after a rejection)"),
    ("tok-resampled", "baz", "replacement from the target"),
    ("tok-bonus", "qux", "bonus token (all drafts accepted)"),
    ("tok-accepted tok-forced", '{"', "forced by the output format"),
)


def legend_html(plain: bool = False) -> str:
    """A key to the token colours and styles; plain=True adds the plain-decoding swatch."""
    items = list(_LEGEND) + ([("tok-plain", "abc", "plain decoding (target only)")] if plain else [])
    chips = "".join(
        f'<span class="sv-legend-item"><span class="tok {cls}">{esc(sample)}</span> {esc(words)}</span>'
        for cls, sample, words in items
    )
    return f'<div class="specviz-legend">{chips}</div>'
