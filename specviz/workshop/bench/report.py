"""The bench's outputs: bench.json (everything), bench.md (the tables) and bench.png (speedup
by method and prompt)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specviz.choices import HEAD, LLAMACPP, TORCH
from specviz.workshop.bench.methods import GATHERED, PACKED, variant
from specviz.workshop.bench.summary import plain_reference, vs_key

JSON_NAME, MARKDOWN_NAME, PLOT_NAME = "bench.json", "bench.md", "bench.png"
# Draft positions the acceptance-by-position table has a column for.
POSITIONS_SHOWN = 5
# What each variant of a transformers method changes, for the note above the tables.
VARIANT_NOTES = {
    GATHERED: "its LM heads fed rows of their own (`hf_baselines.gathered_heads`), removing a slow path its "
    "prefill takes on some CPUs in bf16",
    PACKED: "its linear layers computing through the oneDNN-packed weights specviz's own loop uses "
    "(`hf_baselines.packed_layers`)",
}


def write_all(result: dict[str, Any], out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / JSON_NAME, "markdown": out / MARKDOWN_NAME, "plot": out / PLOT_NAME}
    paths["json"].write_text(json.dumps(result, indent=1, ensure_ascii=False, allow_nan=False))
    paths["markdown"].write_text(markdown(result))
    plot(result, paths["plot"])
    return paths


def write_traces(raw, out: Path) -> list[Path]:
    """Each specviz run's trace (the first repeat) as `traces/PROMPT.METHOD.json`, a file
    the page's Traces tab opens round by round."""
    written = []
    for pid, by_method in raw.items():
        for name, runs in by_method.items():
            path = out / "traces" / f"{pid}.{name}.json"
            if runs and runs[0].trace is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(runs[0].trace.to_json())
                written.append(path)
    return written


def _runtime(method: dict, meta: dict) -> str:
    """What ran a method's models: specviz's runtime for the pair, torch for transformers,
    llama.cpp for llama-cpp-python and llama.cpp's own tools."""
    library = method.get("library")
    if library == "specviz":
        return meta.get("runtime", TORCH)
    return TORCH if library == "transformers" else LLAMACPP


def markdown(result: dict[str, Any]) -> str:
    lines = _header(result) + _overall(result) + _targets(result["summary"]) + _by_kind(result) + _per_prompt(result)
    lines += _by_position(result)
    summ = result["summary"]
    if summ["mismatches"]:
        lines += ["", "\\* output differs from the reference (greedy runs should match token for token):", ""]
        lines += [
            f"- {m['prompt']} / {m['method']}: first different token at position {m['first_divergence']} (vs {m['reference']})"
            for m in summ["mismatches"]
        ]
    elif result["meta"]["temperature"] == 0:
        lines += ["", "Every method produced the same tokens on every prompt."]
    return "\n".join(lines) + "\n"


def _header(result: dict[str, Any]) -> list[str]:
    """The command, the machine, the pair, and notes on what the run holds."""
    meta = result["meta"]
    methods = [m["name"] for m in result["methods"]]
    lines = [
        "## specviz bench",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Machine: {meta['machine']}. Pair: {meta['pair']} ({meta['dtype']} on {meta['device']}{_draft(meta)}; "
        f"load {meta['load_s']:.1f} s, excluded). {_mode(meta)}, {meta['max_new_tokens']} new tokens, "
        f"{len(result['prompts'])} prompts, median of {meta['repeats']} run(s), geometric mean over prompts.",
        "",
    ]
    done, total = meta.get("prompts_done", "0 of 0").split(" of ")
    if done != total:
        lines += [f"**Partial: {done} of {total} prompts finished so far.**", ""]
    if meta.get("processes", 1) > 1:
        lines += [f"Run in {meta['processes']} processes (`--resume`), each prompt's methods in one.", ""]
    if meta.get("vocab"):
        v = meta["vocab"]
        lines += [
            f"The draft has its own tokenizer: {v['shared']} of the target's {v['target_entries']} vocabulary entries "
            f"({v['overlap']:.1%}) have an exact match in its {v['draft_entries']}; `auto` drafts by {v['default_method']}.",
            "",
        ]
    for suffix, what in VARIANT_NOTES.items():
        if any(variant(n) == suffix for n in methods):
            lines += [
                f'`{suffix}`: transformers with {what}; "vs best assisted" and the goals compare with transformers '
                "as shipped.",
                "",
            ]
    generators = _generators(result)
    if generators:
        lines += [
            "transformers' candidate generator: " + "; ".join(f"{n}: {g}" for n, g in generators.items()) + ".",
            "",
        ]
    if meta.get("cost_model"):
        cm = meta["cost_model"]
        sizes = ", ".join(f"{n}: {v:.0f}" for n, v in cm["verify"].items())
        lines += [
            f"Measured pass cost (ms by new tokens; {cm['source']}): target {sizes}; draft {cm['draft']:.0f} per token.",
            "",
        ]
    return lines


def _overall(result: dict[str, Any]) -> list[str]:
    ov = result["summary"]["overall"]
    rows = []
    for m in result["methods"]:
        n, o = m["name"], ov[m["name"]]
        rows.append(
            [n, _runtime(m, result["meta"]), _f(o["tokens_per_s"], 2), _x(o["speedup_vs_hf_plain"])]
            + [_x(o["vs_best_assisted"]), _f(o["acceptance"], 2), _f(o["tokens_per_round"], 2), _f(o["mean_k"], 1)]
            + [_f(o["target_ms"], 0), _f(o["draft_ms"], 0), _x(o["predicted_speedup"])]
            + [_x(o["predicted_speedup_cost"]), _x(o["speedup_vs_sv_plain"]), _yes(o["identical"])]
        )
    return _table(
        "| method | runtime | tok/s | vs hf-plain | vs best assisted | acceptance | tokens/round | mean k | T ms | D ms | predicted (flat T) | predicted (measured V(n)) | measured vs sv-plain | same tokens |",
        rows,
    )


def _targets(summ: dict[str, Any]) -> list[str]:
    if not summ["targets"]:
        return []
    rows = []
    for t in summ["targets"]:
        value = f"{t['value']:.1%}" if "cost" in t["target"] and t["value"] is not None else _f(t["value"], 3)
        rows.append([t["target"], t["goal"], value, _yes(t["met"]), t["detail"]])
    return [""] + _table("| target | goal | value | met | |", rows)


def _by_kind(result: dict[str, Any]) -> list[str]:
    summ = result["summary"]
    by_kind = summ.get("by_kind") or {}
    if len(by_kind) <= 1 and "repetitive" not in by_kind:
        return []
    covered = summ.get("overall_prompts", [])
    kinds = [k for k, by in by_kind.items() if set(by["prompts"]) & set(covered)]
    lines = [
        "",
        'By kind of prompt (geometric means over the kind\'s prompts; "overall" above covers '
        f"{len(covered)} prompts: {', '.join(kinds)}):",
        "",
    ]
    rows = []
    for kind, by in by_kind.items():
        for n in (m["name"] for m in result["methods"]):
            e = by[n]
            worst = f"{_x(e.get('worst_vs_sv_plain'))} ({e['worst_prompt']})" if e.get("worst_prompt") else "\u2014"
            rows.append([kind, n, _f(e["tokens_per_s"], 2), _x(e.get("vs_sv_plain")), _x(e.get("vs_sv_lookup")), worst])
    return lines + _table("| kind | method | tok/s | vs sv-plain | vs sv-lookup | worst vs sv-plain |", rows)


def _per_prompt(result: dict[str, Any]) -> list[str]:
    methods = [m["name"] for m in result["methods"]]
    base = plain_reference(methods)
    if not base:
        return []
    who = "transformers plain decoding" if base == "hf-plain" else "specviz's plain decoding"
    others = [n for n in methods if n != base]
    key = "speedup_" + vs_key(base)
    table = []
    for p in result["prompts"]:
        rows = result["summary"]["per_prompt"][p["id"]]
        cells = [_x(rows[n].get(key)) + ("*" if rows[n].get("identical") is False else "") for n in others]
        tokens = rows[methods[0]]["new_tokens"]
        table.append([p["id"], p["kind"], f"{tokens:.0f}", _f(rows[base].get("tokens_per_s"), 2), *cells])
    header = _cells(["prompt", "kind", "tokens", f"{base} tok/s", *others])
    return ["", f"Speedup over {who} ({base}), per prompt:", ""] + _table(header, table)


def _by_position(result: dict[str, Any]) -> list[str]:
    """Acceptance at draft positions 1 to POSITIONS_SHOWN (accepted of reached, pooled over
    prompts) for each method that drafted; the trained head's held-out figures beside its runs."""
    pooled: dict[str, tuple[list[int], list[int]]] = {}
    for rows in result["summary"]["per_prompt"].values():
        for name, row in rows.items():
            counts = row.get("by_position")
            if not counts:
                continue
            reached, accepted = pooled.setdefault(name, ([0] * POSITIONS_SHOWN, [0] * POSITIONS_SHOWN))
            for i, (r, a) in enumerate(zip(counts["reached"][:POSITIONS_SHOWN], counts["accepted"][:POSITIONS_SHOWN])):
                reached[i], accepted[i] = reached[i] + r, accepted[i] + a
    if not pooled:
        return []
    rows = [
        [name] + [f"{a / r:.2f} ({r})" if r else "-" for r, a in zip(reached, accepted)]
        for name, (reached, accepted) in pooled.items()
    ]
    header = _cells(["method"] + [str(i + 1) for i in range(POSITIONS_SHOWN)])
    lines = ["", "Acceptance by draft position (accepted / reached, all prompts):", ""] + _table(header, rows)
    head = result["meta"].get("draft_head")
    if head and any(n == f"sv-{HEAD}" for n in pooled):
        held = "; ".join(
            f"{part}: " + ", ".join(f"{a:.2f}" for a in rates) for part, rates in head["acceptance"].items()
        )
        lines += [
            "",
            f"The draft head's held-out greedy acceptance by position when it was trained ({held}); "
            f"{head['steps']:,} steps on {', '.join(f'{n:,} {k} tokens' for k, n in head['tokens'].items())}.",
        ]
    return lines


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    summ = result["summary"]
    methods = [m["name"] for m in result["methods"] if m["name"] != "hf-plain"]
    labels = [p["id"] for p in result["prompts"]] + ["geomean"]
    values = np.array(
        [
            [summ["per_prompt"][p["id"]][n].get("speedup_vs_hf_plain") or np.nan for p in result["prompts"]]
            + [summ["overall"][n]["speedup_vs_hf_plain"] or np.nan]
            for n in methods
        ],
        dtype=float,
    )
    width = 0.8 / max(len(methods), 1)
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(labels) * max(1, len(methods) / 3)), 5.5))
    x = np.arange(len(labels))
    cmap = plt.get_cmap("tab20")
    for i, n in enumerate(methods):
        hatch = "//" if n.startswith("hf-") else None
        ax.bar(
            x + (i - (len(methods) - 1) / 2) * width,
            values[i],
            width,
            label=n,
            color=cmap(i % 20),
            hatch=hatch,
            edgecolor="white",
            linewidth=0.3,
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("speedup over transformers plain decoding")
    meta = result["meta"]
    ax.set_title(
        f"{meta['pair']}, {_mode(meta)}, {meta['max_new_tokens']} new tokens ({meta['device']}, {meta['dtype']})",
        fontsize=10,
    )
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _generators(result: dict[str, Any]) -> dict[str, str]:
    """The candidate generator each hf-universal* method ran, from its first recorded sample."""
    out = {}
    for m in result["methods"]:
        if not m["name"].startswith("hf-universal"):
            continue
        for runs in result["samples"].values():
            if runs.get(m["name"]) and runs[m["name"]][0].get("hf_generator"):
                out[m["name"]] = runs[m["name"]][0]["hf_generator"]
                break
    return out


def _draft(meta: dict) -> str:
    """Where the draft was quantized at load, say so: transformers got the same draft."""
    precision = meta.get("draft_precision")
    return f", draft in {precision} for both libraries" if precision and precision != meta["dtype"] else ""


def _mode(meta: dict) -> str:
    return "greedy" if meta["temperature"] == 0 else f"sampling at temperature {meta['temperature']:g}"


def _table(header: str, rows: list[list[str]]) -> list[str]:
    """A Markdown table: the header line, its rule, a line per row of cells."""
    return [header, "|---" * (header.count("|") - 1) + "|"] + [_cells(row) for row in rows]


def _cells(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _f(x, digits: int) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _x(x) -> str:
    return "–" if x is None else f"{x:.2f}x"


def _yes(x) -> str:
    return "–" if x is None else ("yes" if x else "**no**")
