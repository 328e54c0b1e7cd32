"""Where a draft-free round's candidates came from: suffix decoding's match and speculation
tree, lookahead's Jacobi window and the n-grams it made. Drawn from the RoundEvent alone
(`event.source`, `event.tree`), so an uploaded trace replays it.

    source_html(event)   suffix: the matched suffix, how often it occurred before, and each
                         node of the speculation tree with its count, the path the target
                         took marked; lookahead: the window fed with this pass (levels by
                         columns), the n-grams the pass made from it, and the candidates
                         verified with where each was found
"""

from __future__ import annotations

from specviz.events import CandidateSource, RoundEvent
from specviz.viz.text import MISSING_HTML, esc, paragraphs_html, plural
from specviz.viz.tokens import round_is_greedy, token_span
from specviz.choices import HEAD, SUFFIX

DECISION_WORDS = {"accepted": "accepted", "rejected": "rejected", "unchecked": "not checked"}


def _chip(text: str, kind: str = "", title: str = "") -> str:
    return token_span(text, f"tok-{kind}" if kind else "sv-source-tok", title)


def _seq(texts: list[str]) -> str:
    return "".join(_chip(t) for t in texts) or MISSING_HTML


def source_html(event: RoundEvent) -> str:
    src = event.source
    if src is None:
        return paragraphs_html([f"Round {event.index} was not drafted by a draft-free tree method."], "sv-muted")
    body = (
        _suffix(event, src) if src.method == SUFFIX else _head(event) if src.method == HEAD else _lookahead(event, src)
    )
    note = paragraphs_html([src.note], "sv-muted") if src.note else ""
    return f'<div class="specviz-text sv-source" data-method="{esc(src.method)}">{body}{note}</div>'


def _nodes(event: RoundEvent, label) -> str:
    """The round's tree as an indented list, root first: each node's token, decision and
    label. A one-wide tree went through the chain pass: its drafted tokens are the nodes."""
    nodes = [(n.depth, n.text, n.decision) for n in event.tree] or [
        (i + 1, d.text, d.decision) for i, d in enumerate(event.drafted)
    ]
    if not nodes:
        return paragraphs_html(
            ["Nothing was verified this round: one target pass gave the next token, as plain decoding does."],
            "sv-muted",
        )
    items = []
    for i, (depth, text, decision) in enumerate(nodes):
        pad = "\u2003" * (depth - 1)
        items.append(
            f'<li data-node="{i}" data-decision="{decision}">{pad}'
            f"{_chip(text, decision, DECISION_WORDS[decision])} {esc(label(i))}</li>"
        )
    return f'<ul class="sv-source-tree">{"".join(items)}</ul>'


def _suffix(event: RoundEvent, src: CandidateSource) -> str:
    if not src.matched and not src.counts:
        return (
            f"<p>Round {event.index}: the context's last token occurs nowhere earlier with something after it, "
            "so suffix decoding had nothing to propose.</p>"
        )
    m = len(src.matched)
    if not m:  # the guess that the last token replaced one of a broken-off copy's (the note says so)
        head = f"<p>Round {event.index}: the copy read on after the token the context's last token replaced:</p>"
    else:
        head = (
            f"<p>Round {event.index}: the context's last {plural(m, 'token')} "
            f"{_seq(src.matched)} occurred {plural(src.occurrences, 'time')} earlier "
            "(the prompt, the output so far and, on the page, this session's earlier outputs). "
            "What followed them became the speculation tree, each node counting the occurrences that continued "
            "through it:</p>"
        )

    def label(i: int) -> str:
        if i >= len(src.counts):
            return ""
        c = src.counts[i]
        return f"{c} of {src.occurrences} ({c / src.occurrences:.0%})"

    path = event.accepted
    taken = (
        f"<p>The target took {plural(path, 'node')} of the tree, then added its own token.</p>"
        if event.tree or event.drafted
        else ""
    )
    return head + _nodes(event, label) + taken


def _head(event: RoundEvent) -> str:
    """A head round: where its state came from, and each drafted token with its q."""
    start = (
        f"<p>Round {event.index}: the draft head started from the target's own hidden state at the last accepted "
        "position (the previous verify pass computed it) and the token the target chose there, guessed the "
        "target's next state, read out q over its vocabulary (q = 0 outside it), drew a token, and went on from "
        "its own guess. It keeps no cache: unlike a draft model, it has nothing to catch up before drafting.</p>"
    )

    greedy = round_is_greedy(event)

    def label(i: int) -> str:  # greedy drafts the head's top choice: no q to show
        return f"q = {event.drafted[i].q:.2f}" if i < len(event.drafted) and not greedy else ""

    return start + _nodes(event, label)


def _lookahead(event: RoundEvent, src: CandidateSource) -> str:
    parts = [f"<p>Round {event.index}: "]
    if src.window_on and src.window:
        levels, cols = len(src.window), len(src.window[0]) if src.window else 0
        parts.append(
            f"the Jacobi window ({cols} columns, {levels} levels) rode in the target's pass beside the candidates. "
            "Column i of level j is the guess for position i + j after the root (level 0's first column); each "
            "guess sees the guesses below it in its column.</p>"
        )
        rows = []
        for j, level in enumerate(src.window):
            cells = "".join(f"<td>{_chip(t)}</td>" for t in level)
            rows.append(f'<tr><th scope="row">level {j}</th>{cells}</tr>')
        head = "".join(f'<th scope="col">column {i}</th>' for i in range(cols))
        parts.append(f'<table class="sv-source-window"><tr><th></th>{head}</tr>{"".join(rows)}</table>')
        if src.ngrams:
            parts.append(
                "<p>From each column the pass made an n-gram (the column's guesses and the target's next guess "
                "after them), kept for a later round whose last token is its first:</p>"
            )
            parts.append('<ul class="sv-source-ngrams">' + "".join(f"<li>{_seq(g)}</li>" for g in src.ngrams) + "</ul>")
    else:
        parts.append(
            "the Jacobi window was resting (its last trial did not pay for its share of the pass); "
            "only n-grams already found were proposed.</p>"
        )
    origin_words = {"window": "an n-gram of the window", "context": "what followed this token earlier in the context"}

    def label(i: int) -> str:
        return f"from {origin_words.get(src.origins[i], src.origins[i])}" if i < len(src.origins) else ""

    parts.append("<p>Candidates verified this round (n-grams starting with the last token, merged into a tree):</p>")
    parts.append(_nodes(event, label))
    return "".join(parts)
