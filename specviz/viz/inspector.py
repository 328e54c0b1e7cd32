"""Round inspector: one round told in plain words, and p vs q at one of its positions.

The story is built once as sentences over a small formatter, so the same words come out as
plain text (`round_story`, for logs and tests) and as escaped HTML (`round_narrative_html`).
Positions are 1-based, as in the token stream's `data-pos`: 1..len(drafted) are the drafts,
len(drafted)+1 is the bonus position.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.events import RoundEvent, Trace
from specviz.run_stats import rounds_of
from specviz.viz.policy_words import why_plain
from specviz.viz.palette import DRAFT, MONO, OVERLAP, RESIDUAL, TARGET, empty_figure, label_axis, style_figure
from specviz.viz.text import EMPTY_MARK, esc, label_html, plural, quoted, visible_text
from specviz.viz.tokens import fmt_prob, fmt_ratio, ratio, round_is_greedy
from specviz.choices import HEAD, LOOKAHEAD, SUFFIX

# Who proposed a round's tokens, by the method that did (the draft model otherwise).
PROPOSERS = {
    SUFFIX: "suffix decoding's speculation tree",
    LOOKAHEAD: "lookahead's n-grams",
    HEAD: "the draft head (from the target's own state)",
}
NEAR_TIE_LOGITS = 0.5  # a top-2 logit gap this small can flip between a 1-token and a k-token pass


def trace_rounds(trace: Trace | None) -> list[RoundEvent]:
    """The rounds a trace holds (none without a trace): what the inspector steps through."""
    return rounds_of(trace.events) if trace is not None else []


def round_at(rounds: list[RoundEvent], round_index) -> int:
    """The chosen round's index (the slider's value; none: the first), clamped to the run."""
    return min(max(int(round_index or 0), 0), len(rounds) - 1)


class _Plain:
    def tok(self, text: str) -> str:
        return quoted(text)

    def word(self, text: str, kind: str) -> str:
        return text

    def s(self, text: str) -> str:
        return text


class _Html(_Plain):
    def tok(self, text: str) -> str:
        return f"<code>{esc(visible_text(text)) or EMPTY_MARK}</code>"

    def word(self, text: str, kind: str) -> str:
        return f'<span class="sv-decision-{kind}">{esc(text)}</span>'

    def s(self, text: str) -> str:
        return esc(text)


def _all_accepted(k: int) -> str:
    return (
        "The draft was accepted"
        if k == 1
        else "Both drafts were accepted"
        if k == 2
        else f"All {k} drafts were accepted"
    )


def _story(event: RoundEvent, f: _Plain, vocab: int | None = None) -> tuple[str, list[str], str, str]:
    greedy = round_is_greedy(event)
    steps = [
        _judgement(event, i, d, f, greedy) + f.s(grammar_note(event, i, vocab))
        for i, d in enumerate(event.drafted, start=1)
        if d.decision != "unchecked"
    ]
    return _intro(event, f, greedy), steps, _outcome(event, f, greedy), _result(event, f)


def grammar_note(event: RoundEvent, i: int, vocab: int | None = None) -> str:
    """What the output format did at position i: the token forced, how many tokens it allowed
    (of `vocab`, where known) and the share of p's mass they held; "" without a format."""
    info = event.positions[i - 1] if i <= len(event.positions) else None
    forced = i <= len(event.drafted) and event.drafted[i - 1].forced
    parts = ["forced by the output format: proposed as a point mass, with no drafting"] if forced else []
    if info is not None and info.allowed is not None:
        of = f" of {vocab:,}" if vocab else ""
        kept = f"; p kept {info.kept:.0%} of its mass" if info.kept is not None else ""
        parts.append(f"the grammar allowed {info.allowed:,}{of} tokens here{kept}")
    return f" ({'; '.join(parts)})" if parts else ""


def _intro(event: RoundEvent, f: _Plain, greedy: bool) -> str:
    k = len(event.drafted)
    if k == 0:
        # The engine's first round reads the prompt's prefill; a later one is a round where the
        # cost-aware policy found that no draft pays, and says why.
        idle = (
            "nothing was proposed (no candidate was found, or none paid for its share of the pass)"
            if event.source is not None
            else f"nothing was drafted ({why_plain(event) or 'no draft length paid'})"
        )
        what = (
            "the prompt's prefill gives the target's distribution for the first token, before anything is drafted"
            if event.index == 0
            else f"{idle}, so one target pass gives the next token"
        )
        return f.s(f"Round {event.index}: {what}" + (", choosing greedily." if greedy else "."))
    toks = ", ".join(f.tok(d.text) for d in event.drafted)
    return (
        f.s(
            f"Round {event.index}: {PROPOSERS.get(event.source.method if event.source else '', 'the draft')} proposed "
            f"{plural(k, 'token')} ({event.draft_ms:.0f} ms): "
        )
        + toks
        + f.s(
            (f" ({why_plain(event)})" if why_plain(event) else "")
            + f". The target checked {'it' if k == 1 else 'them'} in one pass ({event.verify_ms:.0f} ms)"
            + (", choosing greedily." if greedy else ".")
        )
    )


def _judgement(event: RoundEvent, i: int, d, f: _Plain, greedy: bool) -> str:
    """Position i's verdict with the numbers behind it."""
    head = f.s(f"Position {i}: ")
    if greedy and d.decision == "accepted":
        return (
            head
            + f.tok(d.text)
            + f.s(" matches the target's top choice, so it is ")
            + f.word("accepted", "accepted")
            + f.s(".")
        )
    if greedy:
        e, pos = event.emitted, event.positions
        top = e.text if e is not None else (pos[i - 1].top[0].text if i <= len(pos) and pos[i - 1].top else "")
        gap = pos[i - 1].top2_logit_gap if i <= len(pos) else None
        tie = (
            f" (a near-tie: the target's top two logits differ by only {gap:.2f})"
            if gap is not None and gap < NEAR_TIE_LOGITS
            else ""
        )
        return (
            head
            + f.s("the target's top choice is ")
            + f.tok(top)
            + f.s(", not ")
            + f.tok(d.text)
            + f.s(", so it is ")
            + f.word("rejected", "rejected")
            + f.s(tie + ".")
        )
    if event.tree:  # chosen, not sampled: checked as a point mass against what is left of p
        rule = (
            f" \u2014 a token of the tree, checked as a point mass: u = {fmt_prob(d.u)} against p', the target's "
            f"p = {fmt_prob(d.p)} less the siblings rejected before it, so it is "
        )
        return head + f.tok(d.text) + f.s(rule) + f.word(d.decision, d.decision) + f.s(".")
    r = ratio(d.p, d.q)
    nums = f" \u2014 the target gives p = {fmt_prob(d.p)}, {_proposer(event)} gave q = {fmt_prob(d.q)}"
    if d.decision == "accepted" and r >= 1:
        rule, tail = f"; p/q = {fmt_ratio(r)} \u2265 1, so it is ", f" whatever u (u = {fmt_prob(d.u)})."
    elif d.decision == "accepted":
        rule, tail = f"; u = {fmt_prob(d.u)} < p/q = {fmt_ratio(r)}, so it is ", "."
    else:
        rule, tail = f"; u = {fmt_prob(d.u)} \u2265 p/q = {fmt_ratio(r)}, so it is ", "."
    return head + f.tok(d.text) + f.s(nums + rule) + f.word(d.decision, d.decision) + f.s(tail)


def _proposer(event: RoundEvent) -> str:
    """Who proposed the round's tokens, after the first sentence has named it: the draft model
    or the draft head (each with its own q), or a draft-free method's proposal (its tokens
    certain: q = 1)."""
    if event.source is not None and event.source.method == HEAD:
        return "the head"
    return "the draft" if event.source is None else "the proposal"


def _outcome(event: RoundEvent, f: _Plain, greedy: bool) -> str:
    """What the target added: a bonus, a replacement, or nothing at the run's end."""
    e, k = event.emitted, len(event.drafted)
    unchecked = [d for d in event.drafted if d.decision == "unchecked"]
    dropped = ""
    if unchecked:
        whose = "The draft's" if event.source is None else "The proposal's"
        dropped = (
            f.s(f" {whose} {plural(len(unchecked), 'later token')} (")
            + ", ".join(f.tok(d.text) for d in unchecked)
            + f.s(") " + ("is" if len(unchecked) == 1 else "are") + " discarded unchecked.")
        )
    source = "its top choice" if greedy else "drawn from p"
    if e is None:
        return f.s("The run stopped after this round (end of text or the token limit), so the target added no token.")
    if e.kind == "bonus" and k == 0:
        return f.s("The target's token: ") + f.tok(e.text) + f.s(f", {source} (p = {fmt_prob(e.p)}).")
    if e.kind == "bonus":
        return (
            f.s(f"{_all_accepted(k)}, so the same target pass also gives a ")
            + f.word("bonus", "bonus")
            + f.s(" token: ")
            + f.tok(e.text)
            + f.s(f", {source} at position {k + 1} (p = {fmt_prob(e.p)}).")
        )
    if greedy:
        return (
            f.s("The target's choice ")
            + f.tok(e.text)
            + f.s(" is emitted in its place as the ")
            + f.word("replacement", "resampled")
            + f.s(".")
            + dropped
        )
    return (
        f.s("The ")
        + f.word("replacement", "resampled")
        + f.s(" ")
        + f.tok(e.text)
        + f.s(
            f" is drawn from the residual norm(max(0, p \u2212 q)) at position {event.accepted + 1} (the target gives it p = {fmt_prob(e.p)})."
        )
        + dropped
    )


def _result(event: RoundEvent, f: _Plain) -> str:
    gained, e = event.gained, event.emitted
    if not event.drafted:
        return f.s(f"Result: {plural(gained, 'new token')}, as plain decoding gets from a pass.")
    parts = [plural(event.accepted, "accepted draft" if event.source is None else "accepted proposed token")]
    if e is not None:
        parts.append(f"1 {'bonus' if e.kind == 'bonus' else 'replacement'}")
    return f.s(
        f"Result: {' + '.join(parts)} = {plural(gained, 'new token')} from one target pass (plain decoding would need {plural(gained, 'pass')})."
    )


def round_story(event: RoundEvent, vocab: int | None = None) -> list[str]:
    """The round as plain sentences: what was drafted, each judgement with its numbers (and what
    an output format allowed there, `vocab` the tokens it chose from), what the target added,
    and the tally."""
    intro, steps, outcome, result = _story(event, _Plain(), vocab)
    return [intro, *steps, outcome, result]


def round_narrative_html(event: RoundEvent, vocab: int | None = None) -> str:
    """The same story as `round_story`, as escaped HTML with the decisions coloured."""
    intro, steps, outcome, result = _story(event, _Html(), vocab)
    items = "".join(f"<li>{s}</li>" for s in steps)
    return (
        f'<div class="specviz-text specviz-narrative"><p>{intro}</p>'
        + (f"<ul>{items}</ul>" if items else "")
        + f"<p>{outcome}</p><p>{result}</p></div>"
    )


def position_choices(event: RoundEvent) -> list[tuple[str, int]]:
    """(label, position) pairs for a picker: every position the target has numbers for."""
    out = []
    for i, d in enumerate(event.drafted, start=1):
        if i <= len(event.positions):
            out.append((f"{i}: {quoted(d.text)} ({d.decision})", i))
    if event.emitted is not None and event.emitted.kind == "bonus" and len(event.positions) > len(event.drafted):
        out.append((f"{len(event.drafted) + 1}: {quoted(event.emitted.text)} (bonus)", len(event.drafted) + 1))
    return out


def position_bars_figure(event: RoundEvent, position: int, top_n: int = 10, title: str | None = None) -> go.Figure:
    """p vs q over the top tokens at one position, their overlap min(p, q), and below it the
    residual max(0, p - q) / (1 - overlap) that a replacement is drawn from.

    The drafted token is marked \u25b2 and the token the target emitted here \u2605.
    """
    if not 1 <= position <= len(event.positions):
        return empty_figure(f"Round {event.index} has no numbers for position {position}", title)
    info = event.positions[position - 1]
    bonus = position > len(event.drafted)
    drafted = None if bonus else event.drafted[position - 1]
    e = event.emitted
    emitted_here = e is not None and position == event.accepted + 1
    marked = {t.id for t in ([drafted] if drafted else []) + ([e] if emitted_here else [])}
    top = sorted(info.top, key=lambda t: -t.p)
    shown = top[:top_n] + [t for t in top[top_n:] if t.id in marked]
    if not shown:
        return empty_figure("No candidates recorded at this position", title)
    labels = _marked_labels(shown, drafted, e if emitted_here else None)
    title = title or (
        f"Round {event.index}, bonus position {position}: drawn from p"
        if bonus
        else f"Round {event.index}, position {position}: overlap \u03b2 = {info.overlap:.2f}"
    ) + (f" (the grammar allowed {info.allowed:,} tokens; p kept {info.kept:.0%})" if info.allowed is not None else "")
    rest = 1 - info.overlap
    with_residual = not bonus and rest > 1e-9
    fig = make_subplots(
        rows=2 if with_residual else 1,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.65, 0.35] if with_residual else None,
        vertical_spacing=0.08,
    )
    _add_position_bars(fig, shown, bonus, rest if with_residual else None)
    fig.update_yaxes(title_text="probability", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(**label_axis(labels, tickfont={"family": MONO, "size": 13}))
    fig.update_layout(barmode="group")
    return style_figure(fig, title, height=420 if with_residual else 320)


def _marked_labels(shown: list, drafted, emitted) -> list[str]:
    """Tick labels for the shown tokens: the drafted one marked \u25b2 and the emitted one
    \u2605 (None where the target emitted nothing here), in bold."""
    labels = []
    for t in shown:
        mark = ("\u25b2" if drafted is not None and t.id == drafted.id else "") + (
            "\u2605" if emitted is not None and t.id == emitted.id else ""
        )
        labels.append(f"<b>{label_html(t.text)} {mark}</b>" if mark else label_html(t.text))
    return labels


def _add_position_bars(fig: go.Figure, shown: list, bonus: bool, rest: float | None) -> None:
    """p over the shown tokens; beside it q and min(p, q) unless this is the bonus position;
    below, where `rest` (1 - overlap) is given, the residual a replacement is drawn from."""
    x = list(range(len(shown)))
    p = [t.p for t in shown]
    q = [t.q for t in shown]
    names = [label_html(t.text, limit=40) for t in shown]
    bar = {"x": x, "customdata": names, "hovertemplate": "%{customdata}: %{y:.3f}<extra>%{fullData.name}</extra>"}
    fig.add_bar(y=p, name="p (target)", marker_color=TARGET, row=1, col=1, **bar)
    if not bonus:
        fig.add_bar(y=q, name="q (draft)", marker_color=DRAFT, row=1, col=1, **bar)
        overlap = [min(a, b) for a, b in zip(p, q)]
        fig.add_bar(y=overlap, name="min(p, q)", marker_color=OVERLAP, row=1, col=1, **bar)
    if rest is not None:
        residual = [max(0.0, a - b) / rest for a, b in zip(p, q)]
        fig.add_bar(y=residual, name="residual (normalised)", marker_color=RESIDUAL, row=2, col=1, **bar)
        fig.update_yaxes(title_text="residual", rangemode="tozero", row=2, col=1)
