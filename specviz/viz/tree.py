"""One round's token tree (`tree_figure`), its attention mask (`tree_mask_figure`), and a
cross-tokenizer round's alignment (`alignment_html`). All three draw from a RoundEvent alone,
so an uploaded trace replays them.

`tree_mask(parents)` computes the mask in plain Python, as `specviz.lm.tree.ancestry` does
with torch for the real pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from specviz.choices import VOCAB_METHODS, method_phrase
from specviz.events import EmittedToken, RoundEvent
from specviz.viz.palette import (
    ACCEPTED,
    BONUS,
    GRID,
    MONO,
    NEUTRAL,
    REJECTED,
    RESAMPLED,
    TARGET,
    empty_figure,
    label_axis,
    style_figure,
)
from specviz.viz.text import MISSING_HTML, label_html, paragraphs_html, plotly_text, plural, quoted
from specviz.viz.tokens import fmt_prob, round_is_greedy, token_span

DECISION_COLOURS = {"accepted": ACCEPTED, "rejected": REJECTED, "unchecked": NEUTRAL}
DECISION_NAMES = {"accepted": "accepted path", "rejected": "rejected", "unchecked": "unchecked"}
ROOT_LABEL = "root"
NO_TARGET_YET = (
    '<span class="sv-muted" title="no target token yet: its text was incomplete or beyond this round\'s k">'
    "\u2014</span>"
)


def check_parents(parents: Sequence[int]) -> None:
    """Each parent is -1 (the root) or an earlier node, as the engine records them."""
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"node {i} has parent {p}: a parent must be -1 or an earlier node")


def tree_mask(parents: Sequence[int]) -> list[list[int]]:
    """(n + 1) x (n + 1) rows and columns: the root (the last output token), then node 0..n-1.

    [i][j] is 1 where row i may attend to column j in the target's pass: itself and its
    ancestors, the root included; 0 for siblings, cousins and descendants."""
    check_parents(parents)
    n = len(parents)
    rows = [[1] + [0] * n]
    for i, p in enumerate(parents):
        row = list(rows[p + 1])  # the parent's row: the root and every ancestor
        row[i + 1] = 1
        rows.append(row)
    return rows


def _children(parents: Sequence[int]) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {-1: []}
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
        kids.setdefault(i, [])
    return kids


def accepted_path(event: RoundEvent) -> list[int]:
    """The accepted nodes from the root down (each the accepted child of the one before)."""
    path, node = [], -1
    kids = _children([t.parent for t in event.tree])
    while True:
        nxt = next((c for c in kids.get(node, []) if event.tree[c].decision == "accepted"), None)
        if nxt is None:
            return path
        path.append(nxt)
        node = nxt


def tree_layout(parents: Sequence[int], extra_leaf_under: int | None = None) -> tuple[dict[int, int], dict[int, float]]:
    """Depth and vertical slot of the root (-1), every node and, with `extra_leaf_under`, one
    more leaf (key len(parents)) under that node: leaves take slots 0, 1, 2, ... in depth-first
    order, siblings in their listed order, and a parent sits level with its first child, so
    the branch the draft liked best reads as a straight line."""
    check_parents(parents)
    kids = _children(parents)
    extra = len(parents)
    if extra_leaf_under is not None:
        kids[extra_leaf_under] = kids[extra_leaf_under] + [extra]
        kids[extra] = []
    depth: dict[int, int] = {-1: 0}
    slot: dict[int, float] = {}
    next_leaf = 0
    stack: list[tuple[int, bool]] = [(-1, False)]
    while stack:  # iterative depth-first walk: a 64-node chain must not recurse 64 deep
        node, done = stack.pop()
        if done:
            slot[node] = slot[kids[node][0]]
            continue
        if not kids[node]:
            slot[node] = next_leaf
            next_leaf += 1
            continue
        stack.append((node, True))
        for c in reversed(kids[node]):
            depth[c] = depth[node] + 1
            stack.append((c, False))
    return depth, slot


def _p_words(p: float | None, greedy: bool) -> str:
    if p is None:
        return "p: not checked (its parent was not accepted)"
    if greedy:
        return "p: the target's top choice here" if p >= 0.5 else "p: not the target's top choice here"
    return f"p = {fmt_prob(p)} (target)"


def tree_figure(event: RoundEvent, title: str | None = None) -> go.Figure:
    """The round's tree: depth to the right, one row per leaf. Nodes are coloured accepted
    (the path the target took), rejected or unchecked; the target's choice at each level (the
    accepted node, and the token it emitted below the path) is ringed; hover shows the text,
    q and p."""
    if not event.tree:
        return empty_figure(f"Round {event.index} drafted a chain, not a tree", title)
    nodes = event.tree
    parents = [t.parent for t in nodes]
    path = accepted_path(event)
    last = path[-1] if path else -1
    e = event.emitted
    depth, slot = tree_layout(parents, last if e is not None else None)
    greedy = round_is_greedy(event) if event.drafted else all(t.p in (None, 0.0, 1.0) for t in nodes)
    on_path = set(path)
    title = title or (
        f"Round {event.index}: {len(nodes)} drafted nodes, {len(path)} accepted"
        + (f", then {quoted(e.text)}" if e is not None else "")
    )

    fig = go.Figure()
    _edges(fig, parents, on_path, depth, slot, last if e is not None else None)
    _root(fig, slot[-1])
    _nodes(fig, nodes, depth, slot, greedy)
    if e is not None:
        _emitted(fig, e, depth[len(nodes)], slot[len(nodes)])
    chosen = list(path) + ([len(nodes)] if e is not None else [])
    if chosen:
        fig.add_scatter(
            x=[depth[i] for i in chosen],
            y=[slot[i] for i in chosen],
            mode="markers",
            name="the target's choice",
            marker={"symbol": "circle-open", "size": 26, "color": TARGET, "line": {"width": 2.5}},
            hoverinfo="skip",
        )
    top = max(depth.values())
    leaves = max(slot.values()) + 1
    fig.update_xaxes(
        title_text="depth (tokens after the root)",
        tickmode="array",
        tickvals=list(range(top + 1)),
        range=[-0.7, top + 0.6],
        showgrid=False,
    )
    fig.update_yaxes(visible=False, range=[leaves - 0.4, -0.8])  # reversed: the first leaf on top
    return style_figure(fig, title, height=max(260, 120 + 34 * leaves))


def _root(fig: go.Figure, slot: int) -> None:
    """The root, the last output token, at depth 0."""
    fig.add_scatter(
        x=[0],
        y=[slot],
        mode="markers+text",
        name="root (the last output token)",
        text=[ROOT_LABEL],
        textposition="middle left",
        marker={"symbol": "square", "size": 12, "color": NEUTRAL},
        hovertemplate="the root: the last token of the output so far<extra></extra>",
        showlegend=False,
    )


def _emitted(fig: go.Figure, e: EmittedToken, depth: int, slot: int) -> None:
    """The token the target emitted below the path: a star, blue for a bonus, amber for a replacement."""
    kind = "bonus" if e.kind == "bonus" else "replacement"
    hover = (
        f"emitted by the target after the path: {plotly_text(quoted(e.text))} (id {e.id})<br>"
        f"{kind}, p = {fmt_prob(e.p)}"
    )
    marker = {"symbol": "star", "size": 18, "color": BONUS if e.kind == "bonus" else RESAMPLED}
    _tokens(fig, [depth], [slot], f"emitted ({kind})", [e.text], marker, [hover])


def _tokens(fig: go.Figure, xs: list, ys: list, name: str, texts: list[str], marker: dict, hover: list[str]) -> None:
    """Tokens as markers with their text above, shortened, and `hover` (Plotly text) on hover."""
    fig.add_scatter(
        x=xs,
        y=ys,
        mode="markers+text",
        name=name,
        text=[label_html(t, 10) for t in texts],
        textposition="top center",
        textfont={"family": MONO, "size": 12},
        marker=marker,
        customdata=hover,
        hovertemplate="%{customdata}<extra></extra>",
    )


def _edges(
    fig: go.Figure, parents: list[int], on_path: set[int], depth: dict, slot: dict, emitted_under: int | None
) -> None:
    """The accepted path thick and green (on to the emitted token, where there is one), the rest thin."""
    for name, chosen, colour, width in (("edges", False, GRID, 1.5), ("path", True, ACCEPTED, 4)):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for i, p in enumerate(parents):
            if (i in on_path) == chosen:
                xs += [depth[p], depth[i], None]
                ys += [slot[p], slot[i], None]
        if chosen and emitted_under is not None:
            xs += [depth[emitted_under], depth[len(parents)], None]
            ys += [slot[emitted_under], slot[len(parents)], None]
        if xs:
            fig.add_scatter(
                x=xs, y=ys, mode="lines", line={"color": colour, "width": width}, hoverinfo="skip", showlegend=False
            )


def _nodes(fig: go.Figure, nodes, depth: dict, slot: dict, greedy: bool) -> None:
    """The drafted nodes, one trace per decision, with their text, q and p on hover."""
    for decision in ("accepted", "rejected", "unchecked"):
        idx = [i for i, t in enumerate(nodes) if t.decision == decision]
        if not idx:
            continue
        hover = [
            f"node {i} \u00b7 depth {nodes[i].depth} \u00b7 {plotly_text(quoted(nodes[i].text))} (id {nodes[i].token})<br>"
            f"q = {fmt_prob(nodes[i].q)} (draft)<br>{plotly_text(_p_words(nodes[i].p, greedy))}<br>{decision}"
            for i in idx
        ]
        colour, opacity = DECISION_COLOURS[decision], 0.55 if decision == "unchecked" else 1.0
        marker = {"size": 14, "color": colour, "opacity": opacity, "line": {"width": 0}}
        xs, ys = [depth[i] for i in idx], [slot[i] for i in idx]
        _tokens(fig, xs, ys, DECISION_NAMES[decision], [nodes[i].text for i in idx], marker, hover)


def tree_mask_figure(event: RoundEvent, title: str | None = None) -> go.Figure:
    """The round's tree attention mask: a row per token of the target's pass (the root, then
    each node), a column per token it could look at; filled where it may (itself and its
    ancestors). Every row also sees the whole context before the root, not drawn."""
    if not event.tree:
        return empty_figure(f"Round {event.index} drafted a chain: its mask is the usual causal triangle", title)
    parents = [t.parent for t in event.tree]
    mask = tree_mask(parents)
    n = len(parents)
    names = [ROOT_LABEL] + [f"{i} {label_html(t.text, 8)}" for i, t in enumerate(event.tree)]
    words = ["the root"] + [f"node {i} {plotly_text(quoted(t.text))}" for i, t in enumerate(event.tree)]
    hover = [
        [f"{words[r]} {'may' if mask[r][c] else 'may not'} look at {words[c]}" for c in range(n + 1)]
        for r in range(n + 1)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=mask,
            x=list(range(n + 1)),
            y=list(range(n + 1)),
            zmin=0,
            zmax=1,
            xgap=1,
            ygap=1,
            showscale=False,
            colorscale=[[0, "rgba(128, 128, 128, 0.10)"], [1, TARGET]],
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
        )
    )
    ticks = label_axis(names, tickfont={"family": MONO, "size": 11})
    fig.update_xaxes(title_text="may look at", side="top", tickangle=-60, **ticks)
    fig.update_yaxes(title_text="token in the pass", autorange="reversed", **ticks)
    title = title or f"Round {event.index}: tree attention mask ({n + 1} tokens, one pass)"
    return style_figure(fig, title, height=max(300, 150 + 20 * (n + 1))).update_layout(margin={"t": 110, "l": 90})


# --- a cross-tokenizer round ---------------------------------------------------------------


def method_of(meta: Mapping[str, Any] | None) -> str | None:
    """The cross-tokenizer method a trace was drafted with ("text" or "intersection"), if known."""
    meta = meta or {}
    drafter = meta.get("drafter")  # the method the run used; the pair's default may differ
    if isinstance(drafter, str):
        for method in VOCAB_METHODS.names:
            if method_phrase(method) and drafter.endswith(f"-{method}"):
                return method
    vocab = meta.get("vocab")
    if isinstance(vocab, Mapping) and method_phrase(vocab.get("method")):
        return str(vocab["method"])
    return None


def alignment_groups(event: RoundEvent) -> list[tuple[list[int], list[int]]]:
    """(draft token indices, target candidate indices) groups, in order: draft tokens whose
    candidates overlap share a group (a target token that spans two draft tokens), a draft
    token that became several target tokens holds them all, and a draft token that became
    none (its text was still incomplete, or beyond the round's k) stands alone. Target
    candidates no draft token names get a group of their own."""
    n = len(event.drafted)
    groups: list[tuple[list[int], list[int]]] = []
    for i, a in enumerate(event.alignment):
        cands = sorted({c for c in a.candidates if 0 <= c < n})
        if groups and cands and set(cands) & set(groups[-1][1]):
            drafts, targets = groups[-1]
            groups[-1] = (drafts + [i], sorted(set(targets) | set(cands)))
        else:
            groups.append(([i], cands))
    named = {c for _, cands in groups for c in cands}
    for c in range(n):
        if c not in named:
            at = next((g for g, (_, cands) in enumerate(groups) if cands and cands[0] > c), len(groups))
            groups.insert(at, ([], [c]))
    return groups


def alignment_html(event: RoundEvent, meta: Mapping[str, Any] | None = None) -> str:
    """A cross-tokenizer round: the draft's own tokens (top row) above the target tokens they
    became (bottom row), coloured by what the target decided, then the token it emitted.
    `meta` (the trace's) names the method and, when recorded, the vocabulary overlap."""
    if not event.alignment:
        return paragraphs_html(
            [f"Round {event.index} was drafted in the target's own vocabulary: nothing to align."], "sv-muted"
        )
    cols = [_column("draft's own tokens", "target tokens", "", "sv-align-col sv-align-labels")]
    for drafts, targets in alignment_groups(event):
        top = "".join(token_span(event.alignment[i].text, "sv-align-draft-tok", _draft_title(event, i)) for i in drafts)
        bottom = "".join(
            token_span(event.drafted[c].text, f"tok-{event.drafted[c].decision}", _target_title(event, c), pos=c + 1)
            for c in targets
        )
        cols.append(_column(top or MISSING_HTML, bottom or NO_TARGET_YET))
    e = event.emitted
    if e is not None:
        tooltip = f"emitted by the target ({e.kind}): {quoted(e.text)}, p = {fmt_prob(e.p)}"
        cols.append(_column('<span class="sv-muted">target</span>', token_span(e.text, f"tok-{e.kind}", tooltip)))
    counts = {d: sum(x.decision == d for x in event.drafted) for d in ("accepted", "rejected", "unchecked")}
    n_draft = len(event.alignment)
    summary = (
        f"Round {event.index}: the draft wrote {plural(n_draft, 'token')} of its own; "
        f"they became {plural(len(event.drafted), 'target candidate')}: "
        f"{counts['accepted']} accepted, {counts['rejected']} rejected, {counts['unchecked']} unchecked."
    )
    method = method_of(meta)
    how = f"Drafted {method_phrase(method)}: {VOCAB_METHODS[method].explained}." if method else ""
    vocab = (meta or {}).get("vocab")
    overlap = vocab.get("overlap") if isinstance(vocab, Mapping) else None
    if isinstance(overlap, (int, float)):
        how += f" {overlap:.1%} of the target's vocabulary has an exact match in the draft's."
    return (
        f'<div class="specviz-text sv-align">{paragraphs_html([summary])}'
        + (paragraphs_html([how.strip()], "sv-muted") if how else "")
        + f'<div class="sv-align-row">{"".join(cols)}</div></div>'
    )


def _column(top: str, bottom: str, link: str = "\u2193", cls: str = "sv-align-col") -> str:
    """One column of the alignment: `top` (HTML) above `bottom`, joined by `link`."""
    return (
        f'<div class="{cls}"><div class="sv-align-top">{top}</div>'
        f'<div class="sv-align-link" aria-hidden="true">{link}</div><div class="sv-align-bottom">{bottom}</div></div>'
    )


def _draft_title(event: RoundEvent, i: int) -> str:
    a = event.alignment[i]
    n = len(event.drafted)
    became = [c + 1 for c in a.candidates if 0 <= c < n]
    where = (
        f"became target candidate{'s' if len(became) != 1 else ''} {', '.join(map(str, became))}"
        if became
        else "became no target candidate this round"
    )
    return f"the draft's own token {quoted(a.text)} (id {a.id}): {where}"


def _target_title(event: RoundEvent, c: int) -> str:
    d = event.drafted[c]
    return f"target candidate {c + 1}: {quoted(d.text)} (id {d.id}) \u00b7 p = {fmt_prob(d.p)} \u00b7 {d.decision}"
