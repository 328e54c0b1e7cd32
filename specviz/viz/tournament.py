"""The tournament drawn: every drafter on one text, from the dict `python -m specviz tournament
--json` prints and the API returns (`workshop/tournament/report.py`), so the page draws exactly
what the CLI and the API give.

- `heatmap`: predicted speedup over plain decoding, drafter by k (and policy), on one cost
  curve, with the measured run marked;
- `guessed_html`: the answer's tokens, each shaded by how many drafters would have guessed it
  and underlined by the drafter the oracle takes for the round that covers it;
- `ranked_html`: the drafters ranked on one curve, with the oracles;
- `curves_html`: where each curve comes from; `notes_html`: where the figures are exact.

Every speed here is a prediction (the text's verdicts priced on a curve's pass costs); on a
curve other than this machine's it is labelled a prediction for that machine.
"""

from __future__ import annotations

import plotly.graph_objects as go

from specviz.choices import FIXED

from specviz.viz.palette import NEUTRAL, empty_figure, label_axis, style_figure
from specviz.viz.text import esc, panel_html, paragraphs_html, plotly_text, table_html, token_inner_html

THIS_MACHINE = "this machine"  # the curve of the loaded pair's own costs (report's name)
# One colour per drafter in the text's underlines (Okabe-Ito, then greys).
DRAFTER_COLOURS = ("#0072B2", "#009E73", "#D55E00", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#7A828C")


def _columns(d: dict) -> list[str]:
    labels = []
    for e in d["entries"]:
        if e["label"] not in labels:
            labels.append(e["label"])
    return labels


def heatmap(d: dict, curve: str = THIS_MACHINE) -> go.Figure:
    """Predicted speedup over plain decoding, drafter by column (k, then the adaptive policies)."""
    cols = _columns(d)
    rows = [
        c["name"]
        for c in d["contestants"]
        if any(e["drafter"] == c["name"] and curve in e["priced"] for e in d["entries"])
    ]
    if not rows:
        return empty_figure(f"no drafter can be priced on {curve}", "Predicted speedup")
    z, text = [], []
    for name in rows:
        cells = {e["label"]: e for e in d["entries"] if e["drafter"] == name and curve in e["priced"]}
        z.append([cells[c]["priced"][curve]["speedup"] if c in cells else None for c in cols])
        text.append([_cell(cells.get(c), curve) for c in cols])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(len(cols))),
            y=list(range(len(rows))),
            text=text,
            texttemplate="%{text}",
            colorscale=[[0, "#D55E00"], [0.5, "#F7F7F7"], [1, "#009E73"]],
            zmid=1.0,
            colorbar={"title": {"text": "speedup"}},
            hovertemplate="%{text} over plain decoding<extra></extra>",
        )
    )
    for m in d.get("measured", []) if curve == THIS_MACHINE else []:
        label = f"k={m['k']}" if m["policy"] == FIXED else m["policy"]
        if m["drafter"] in rows and label in cols:
            fig.add_scatter(
                x=[cols.index(label)],
                y=[rows.index(m["drafter"])],
                mode="markers",
                marker={"symbol": "circle-open", "size": 26, "line": {"width": 2, "color": NEUTRAL}},
                name=f"measured run: {m['speedup']:.2f}x",
                hovertemplate=plotly_text(f"measured: {m['speedup']:.2f}x, {m['tokens_per_s']:.1f} tok/s")
                + "<extra></extra>",
            )
    fig.update_xaxes(**label_axis(cols))
    fig.update_yaxes(**label_axis(rows), autorange="reversed")
    return style_figure(fig, _title("Predicted speedup over plain decoding", curve), height=80 + 34 * len(rows))


def _cell(e: dict | None, curve: str) -> str:
    if e is None:
        return ""
    s = e["priced"][curve]["speedup"]
    low = e.get("low", {}).get(curve)
    return f"{low['speedup']:.2f}-{s:.2f}x" if low and abs(low["speedup"] - s) > 0.005 else f"{s:.2f}x"


def _title(what: str, curve: str) -> str:
    return f"{what}, {curve}" if curve == THIS_MACHINE else f"{what}: a prediction for {curve}"


def colours(d: dict) -> dict[str, str]:
    names = [c["name"] for c in d["contestants"]]
    return {n: DRAFTER_COLOURS[i % len(DRAFTER_COLOURS)] for i, n in enumerate(names)}


def guessed_html(d: dict) -> str:
    """The answer's tokens shaded by how many drafters would have guessed each (their first
    proposal at that position), underlined by the oracle's drafter for the round covering it."""
    guessed, tokens = d["guessed"], d["text"]["tokens"]
    names = list(guessed)
    colour = colours(d)
    by_token: dict[int, str] = {}
    for start, name, accepted in d["oracle"].get(THIS_MACHINE, {}).get("rounds", []):
        for i in range(start, start + accepted):
            by_token[i] = name
    spans = []
    for i, text in enumerate(tokens):
        who = [n for n in names if i < len(guessed[n]) and guessed[n][i]]
        share = len(who) / len(names) if names else 0.0
        style = f"background: rgba(0, 158, 115, {0.08 + 0.5 * share:.2f});" if who else ""
        if i in by_token:
            style += f" box-shadow: inset 0 -3px 0 {colour.get(by_token[i], NEUTRAL)};"
        title = ", ".join(who) if who else "no drafter"
        if i in by_token:
            title += f"; the oracle takes {by_token[i]}"
        spans.append(f'<span class="tok" style="{style}" title="{esc(title)}">{token_inner_html(text)}</span>')
    legend = " ".join(
        f'<span class="sv-legend-item" style="box-shadow: inset 0 -3px 0 {c};">{esc(n)}</span>'
        for n, c in colour.items()
        if n in names
    )
    intro = paragraphs_html(
        [
            "Each token is shaded by how many drafters would have guessed it had a round started there, and "
            "underlined by the drafter the oracle (the best drafter each round, knowing the answer) takes for "
            "the round that covers it."
        ],
        "sv-muted",
    )
    return panel_html(intro, f'<div class="specviz-stream">{"".join(spans)}</div>', f"<p>{legend}</p>")


def ranked_html(d: dict, curve: str = THIS_MACHINE) -> str:
    """The drafters ranked on `curve`, with plain decoding and the oracles."""
    rows = [e for e in d["entries"] if curve in e["priced"]]
    rows.sort(key=lambda e: -e["priced"][curve]["speedup"])
    body = [
        [
            str(i + 1),
            e["drafter"],
            e["label"],
            f"{e['priced'][curve]['tokens_per_s']:.2f}",
            f"{e['priced'][curve]['speedup']:.2f}x",
        ]
        for i, e in enumerate(rows[:12])
    ]
    for name, key in (
        ("oracle: the best drafter each round", "oracle"),
        ("copy oracle: any earlier copy, free", "copy_oracle"),
    ):
        o = d[key].get(curve)
        if o:
            body.append(["", name, "", f"{o['tokens_per_s']:.2f}", f"{o['speedup']:.2f}x"])
    plain = d["plain"].get(curve)
    if plain:
        body.append(["", "plain decoding", "", f"{plain['tokens_per_s']:.2f}", "1.00x"])
    head = ["#", "drafter", "policy", "tok/s (predicted)", "speedup"]
    words = [_title("Ranked", curve) + ": decode rates after the prefill's first token."]
    return panel_html(paragraphs_html(words), table_html(head, body))


def curves_html(d: dict) -> str:
    """Where each cost curve comes from, with its link where it is a published figure."""
    items = []
    for c in d["curves"]:
        link = f' <a href="{esc(c["link"])}" target="_blank" rel="noopener">{esc(c["link"])}</a>' if c["link"] else ""
        draft = f"D {c['draft']:.1f} ms" if c["draft"] is not None else "no draft model timed"
        v = ", ".join(f"V({n}) {ms:.1f}" for n, ms in list(c["verify"].items())[:6])
        items.append(
            f"<li><b>{esc(c['name'])}</b> ({esc(c['source'])}): {esc(c['where'])}; {esc(v)} ms; {esc(draft)}.{link}</li>"
        )
    return panel_html(f"<ul>{''.join(items)}</ul>")


def notes_html(d: dict) -> str:
    """Where the figures are exact, what each drafter's replay leaves out, and the near ties."""
    t = d["target"]
    lines = [
        f"The target's greedy choice agrees with the text at {t['agrees']:.0%} of its {d['text']['answer_tokens']} tokens"
        + (f" (not at {len(t['differs'])}: a text the target would not have written greedily)" if t["differs"] else "")
        + ".",
        f"Near ties (a top-2 logit gap under {d['near_tie']:g}, where a batched pass may round differently from a "
        f"run's): the target at {len(t['near_ties'])} positions"
        + "".join(f", {c['name']} at {len(c['near_ties'])}" for c in d["contestants"] if c["near_ties"])
        + ".",
    ]
    for c in d["contestants"]:
        lines.append(f"{c['name']}: " + "; ".join(x for x in (c["exact"], c["why"]) if x) + ".")
    return panel_html(paragraphs_html(lines))
