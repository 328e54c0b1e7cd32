"""A tournament's result as plain data: what the CLI prints with --json, the API returns and the
page draws (`viz/tournament.py` reads only this dict), and the table the CLI prints.

Every speed is predicted: this text's verdicts priced on a curve's pass costs. A curve other
than this machine's is labelled a prediction for that machine. A run measured on this text
(the trace the tournament replays) is given beside them as measured.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specviz.choices import DRAFTERS, FIXED, SPECULATIVE
from specviz.errors import UserError
from specviz.events import RoundEvent, Trace
from specviz.workshop.production.export import FORMATS, export
from specviz.workshop.production.found import Found, models_of
from specviz.workshop.tournament.contestants import CHAIN, FREE, TREE
from specviz.workshop.tournament.curves import THIS_MACHINE
from specviz.workshop.tournament.passes import NEAR_TIE, near_ties
from specviz.workshop.tournament.run import Result

EXACT = {
    CHAIN: "exact under greedy decoding: every round of every k and policy follows from one pass",
    FREE: "exact under greedy decoding: the drafter's own code replayed along the text",
    TREE: "bounds: exact where the lower and upper figures meet",
}
RANKED = 12  # rows of the ranked table


def measured(trace: Trace | None) -> list[dict]:
    """The run the trace holds, as measured: its drafter, policy and k, its decode rate (the
    tokens after the prefill's first one over the time they took) and its own speedup."""
    if trace is None or trace.mode != SPECULATIVE:
        return []
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
    if len(rounds) < 2:
        return []
    ms = 1000 * (rounds[-1].t_end_s - rounds[0].t_end_s)
    tokens = rounds[-1].new_tokens - rounds[0].new_tokens
    s = trace.settings
    return [
        {
            "drafter": s.get("drafter"),
            "policy": s.get("policy"),
            "k": s.get("k"),
            "tokens_per_s": round(1000 * tokens / ms, 3) if ms > 0 else 0.0,
            "speedup": round(trace.summary.speedup_vs_plain, 4),
        }
    ]


def _entries(result: Result, detail: bool) -> list[dict]:
    out = []
    for e in result.entries:
        rounds = e.rounds
        drafted = sum(r.drafted for r in rounds)
        row = {
            "drafter": e.drafter,
            "policy": e.config.policy,
            "k": e.config.k,
            "label": e.config.label,
            "priced": {name: p.to_dict() for name, p in e.priced.items()},
            "rounds": len(rounds),
            "tokens_per_round": round(sum(r.tokens for r in rounds) / len(rounds), 3) if rounds else 0.0,
            "acceptance": round(sum(r.accepted for r in rounds) / drafted, 4) if drafted else 0.0,
        }
        if e.low:
            row["low"] = {name: p.to_dict() for name, p in e.low.items()}
        if detail:
            row["accepted"] = [r.accepted for r in rounds]
            row["drafted"] = [r.drafted for r in rounds]
        out.append(row)
    return out


def ranked(entries: list[dict], curve: str) -> list[dict]:
    rows = [e for e in entries if curve in e["priced"]]
    rows.sort(key=lambda e: -e["priced"][curve]["speedup"])
    return rows[:RANKED]


def winner_export(result: Result, entries: list[dict], curve: str) -> dict:
    """The fastest drafter on `curve` as each engine runs it: its best fixed k there (engines
    take a fixed k), through `production.export`."""
    top = ranked(entries, curve)
    if not top:
        return {}
    name = top[0]["drafter"]
    fixed = [e for e in entries if e["drafter"] == name and e["policy"] == FIXED and curve in e["priced"]]
    best = max(fixed, key=lambda e: e["priced"][curve]["speedup"]) if fixed else top[0]
    settings = replace(result.text.settings, drafter=name, k=best["k"], policy=FIXED)
    try:
        target, draft = models_of(result.pair_name)
    except UserError as e:  # a pair no engine can load by name (a custom one): nothing to export
        return {"drafter": name, "k": best["k"], "formats": {}, "note": str(e)}
    found = Found(
        pair=result.pair_name,
        target=target,
        draft=draft,
        drafter=name,
        k=best["k"],
        k_reason=f"the tournament's best fixed k for {name} on {curve}",
        temperature=settings.temperature,
        tree_nodes=settings.tree_nodes,
        tree_width=settings.tree_width,
        early_exit_layers=settings.early_exit_layers,
        suffix_max_nodes=settings.suffix_max_nodes,
    )
    return {"drafter": name, "k": best["k"], "formats": {f: export(found, f).to_dict() for f in FORMATS}}


def to_dict(result: Result, *, texts: list[str], trace: Trace | None = None, detail: bool = False) -> dict:
    """Everything the page, the API and `--json` show (see the module docstring)."""
    text, target = result.text, result.target
    answer = np.asarray(text.answer_ids)
    entries = _entries(result, detail)
    return {
        "text": {
            "label": text.label,
            "source": text.source,
            "prompt_tokens": len(text.prompt_ids),
            "answer_tokens": text.n,
            "temperature": text.settings.temperature,
            "tokens": texts,
        },
        "target": {
            "agrees": round(float((target.argmax == answer).mean()), 4),
            "differs": np.flatnonzero(target.argmax != answer).tolist(),
            "near_ties": near_ties(target.gap),
        },
        "near_tie": NEAR_TIE,
        "contestants": [_contestant(result, c) for c in result.contestants],
        "curves": [c.to_dict() for c in result.curves],
        "entries": entries,
        "guessed": {name: (runs > 0).tolist() for name, runs in result.runs.items()},
        "oracle": _plans(result, result.plans, rounds=True),
        "copy_oracle": _plans(result, result.copy_plans, rounds=False),
        "plain": {name: p.to_dict() for name, p in result.plain.items()},
        "ranked": ranked(entries, THIS_MACHINE),
        "measured": measured(trace),
        "winner": winner_export(result, entries, THIS_MACHINE),
        "seconds": {k: round(v, 2) for k, v in result.seconds.items()},
    }


def _contestant(result: Result, c) -> dict:
    rows = result.drafts.get(c.name)
    label = DRAFTERS[c.name].label if c.name in DRAFTERS else c.name
    ties = near_ties(rows.gap) if rows is not None else []
    return {
        "name": c.name,
        "label": label,
        "kind": c.kind,
        "why": c.why,
        "exact": EXACT.get(c.kind, ""),
        "near_ties": ties,
    }


def _plans(result: Result, plans: dict, *, rounds: bool) -> dict:
    out = {}
    for name, plan in plans.items():
        tokens = result.text.n - 1
        plain_ms = result.plain[name].ms
        d = {
            "tokens_per_s": round(1000 * tokens / plan.ms, 3) if plan.ms > 0 else 0.0,
            "speedup": round(plain_ms / plan.ms, 4) if plan.ms > 0 else 0.0,
        }
        if rounds and name == THIS_MACHINE:
            d["rounds"] = [list(r) for r in plan.rounds]
        out[name] = d
    return out


def table(d: dict, curve: str = THIS_MACHINE) -> str:
    """The ranked drafters on one curve, with the oracles, as Markdown."""
    head = f"| drafter | policy | tok/s | speedup over plain ({curve}) |\n|---|---|---|---|"
    rows = [
        f"| {e['drafter']} | {e['label']} | {e['priced'][curve]['tokens_per_s']:.2f} | {e['priced'][curve]['speedup']:.2f}x |"
        for e in ranked(d["entries"], curve)
    ]
    o, c = d["oracle"][curve], d["copy_oracle"][curve]
    rows.append(f"| oracle (best drafter each round) | | {o['tokens_per_s']:.2f} | {o['speedup']:.2f}x |")
    rows.append(f"| copy oracle | | {c['tokens_per_s']:.2f} | {c['speedup']:.2f}x |")
    return "\n".join([head, *rows])
