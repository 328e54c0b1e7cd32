"""From timed samples to the figures the bench reports, per prompt and overall.

tokens/s is the median over repeats; "overall" is the geometric mean over prompts (a ratio
of 2x on one prompt and 0.5x on another averages to 1x, as it should). Speedups are over
transformers' plain `generate`; the theory's prediction is set beside specviz's speedup over
its own plain decoding, which is what the formula describes.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from specviz import theory
from specviz.choices import FREE_TEXT
from specviz.cost_model import CostModel
from specviz.workshop.bench.harness import BenchOptions, Raw
from specviz.workshop.bench.methods import GATHERED, PACKED, Method, Sample, variant
from specviz.workshop.bench.prompts import COPY_KINDS, FORMAT_KINDS, GOAL_KINDS, BenchPrompt

# The speed goals: the cost-aware chain against transformers' best assisted setting (greedy,
# and sampling), never slower than plain decoding on a prompt, and a plain loop as fast as
# transformers' (by geometric mean, and on every prompt with a little room for drift).
TARGET_VS_ASSISTED = 1.25
TARGET_VS_ASSISTED_SAMPLING = 1.15
TARGET_NEVER_SLOWER = 0.98
TARGET_PLAIN = 0.98
TARGET_PLAIN_EACH = 0.95
TARGET_VS_BEST_FIXED = 0.95
TARGET_VS_BETTER_EACH = 0.95  # on every prompt, against the faster there of sv-plain and each sv-k<K>
TARGET_VS_THEORY = 0.90
TARGET_EVENT_COST = 0.03
# A draft with another tokenizer: specviz at least as fast as transformers'
# generation with `assistant_tokenizer=`, sv-text against its greedy (text) generator and
# sv-intersection against its sampling (vocabulary intersection) one.
TARGET_VS_UNIVERSAL = 1.00
# The draft-free methods: on the repetitive group suffix decoding against prompt
# lookup and plain decoding, on prose lookahead against prompt lookup, and neither below
# plain decoding on any prompt by more than a little.
TARGET_SUFFIX_VS_LOOKUP = 1.30
TARGET_SUFFIX_VS_PLAIN = 1.50
TARGET_LOOKAHEAD_VS_LOOKUP = 1.00
TARGET_DRAFT_FREE_EACH = 0.95
DRAFT_FREE = ("sv-suffix", "sv-lookahead")
# Edit work (answers that copy their input): specviz's best draft-free method against
# llama-cpp-python's plain decoding and llama.cpp's best own n-gram speculation, and the same
# method on the code and prose prompts never below plain decoding by more than a little. On
# the edit tasks the copying drafters were not tuned on (edit-heldout), their own goal.
TARGET_COPY_VS_LC_PLAIN = 2.50
TARGET_HELDOUT_VS_LC_PLAIN = 1.30
TARGET_COPY_VS_LL_NGRAM = 1.50
TARGET_COPY_EACH = 0.97
COPYING = ("sv-suffix", "sv-lookup", "sv-lookahead")
# Under an output format (the json group, greedy): specviz's best constrained speculative method
# against its own constrained plain decoding and llama-cpp-python's grammar decoding, the masks'
# cost per token as a share of a one-token target pass, and every finished answer valid.
TARGET_FORMAT_VS_PLAIN = 1.60
TARGET_FORMAT_VS_LC = 1.50
TARGET_MASK_SHARE = 0.05


# The figures "overall" takes over prompts: ratios and rates by geometric mean, the rest by mean.
GEOMEAN_KEYS = (
    "tokens_per_s",
    "speedup_vs_hf_plain",
    "speedup_vs_sv_plain",
    "predicted_speedup",
    "predicted_speedup_cost",
)
MEAN_KEYS = ("acceptance", "tokens_per_round", "mean_k", "target_ms", "draft_ms", "new_tokens")


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarise(
    raw: Raw, prompts: list[BenchPrompt], methods: list[Method], opts: BenchOptions, *, stop: set[int], cost=None
) -> dict[str, Any]:
    """Per prompt, overall and by kind. "overall" and the older goals cover the code and prose
    prompts (all prompts where the run has none of them); each kind is also summarised apart."""
    names = [m.name for m in methods]
    per_prompt = {p.id: _prompt_rows(raw[p.id], methods, opts, stop, cost) for p in prompts}
    for p in prompts:  # llama-cpp-python writes JSON under its own grammar: other spacing, not a divergence
        for n in names if p.output_format != FREE_TEXT else ():
            if n.startswith("lc-"):
                for key in ("first_divergence", "reference"):
                    per_prompt[p.id][n].pop(key, None)
                per_prompt[p.id][n]["identical"] = None
    goal_prompts = [p for p in prompts if p.kind in GOAL_KINDS] or prompts
    overall = {}
    for m in methods:
        rows = [per_prompt[p.id][m.name] for p in goal_prompts]
        overall[m.name] = {
            **{key: geomean(r.get(key) for r in rows) for key in GEOMEAN_KEYS},
            **{key: _mean(r.get(key) for r in rows) for key in MEAN_KEYS},
            "identical": None
            if opts.temperature > 0 or all(r.get("identical", True) is None for r in rows)
            else all(r.get("identical") is not False for r in rows),
        }
    best_assisted = _best_assisted(names, overall, of="")
    for n in names:
        overall[n]["vs_best_assisted"] = _over(overall, n, best_assisted) if best_assisted else None
    on_goal = {p.id: per_prompt[p.id] for p in goal_prompts}
    by_kind = _by_kind(per_prompt, prompts, names)
    return {
        "per_prompt": per_prompt,
        "overall": overall,
        "overall_prompts": [p.id for p in goal_prompts],
        "by_kind": by_kind,
        "best_assisted": best_assisted,
        "mismatches": _mismatches(per_prompt, names),
        "targets": (
            _targets(on_goal, overall, names, best_assisted, opts)
            + _draft_free_targets(per_prompt, by_kind, names)
            + _copy_targets(per_prompt, prompts, names)
            + _format_targets(per_prompt, prompts, names)
        ),
    }


def _by_kind(per_prompt: dict, prompts: list[BenchPrompt], names: list[str]) -> dict[str, dict]:
    """Per kind of prompt and method: geometric-mean tokens/s and speedups over sv-plain and
    sv-lookup (each prompt's ratio, then their geometric mean), and the worst prompt's ratio
    to sv-plain."""
    out: dict[str, dict] = {}
    for kind in dict.fromkeys(p.kind for p in prompts):
        ids = [p.id for p in prompts if p.kind == kind]
        out[kind] = {"prompts": ids}
        for n in names:
            entry: dict[str, Any] = {"tokens_per_s": geomean(per_prompt[i][n]["tokens_per_s"] for i in ids)}
            for ref in ("sv-plain", "sv-lookup"):
                if ref in names:
                    ratios = _ratios(per_prompt, n, ref, ids)
                    entry[vs_key(ref)] = geomean(ratios.values())
                    if ref == "sv-plain" and ratios:
                        worst = min(ratios, key=ratios.get)
                        entry["worst_vs_sv_plain"], entry["worst_prompt"] = ratios[worst], worst
            out[kind][n] = entry
    return out


def _ratios(per_prompt: dict, name: str, ref: str, ids=None) -> dict[str, float]:
    """`name`'s tokens/s over `ref`'s on each prompt of `ids` (or all) where `ref` ran at all."""
    rows = {i: per_prompt[i] for i in (per_prompt if ids is None else ids)}
    return {i: r[name]["tokens_per_s"] / r[ref]["tokens_per_s"] for i, r in rows.items() if r[ref]["tokens_per_s"]}


def _over(overall: dict, name: str, ref: str) -> float | None:
    """`name`'s overall tokens/s over `ref`'s; None where either has none."""
    num, den = overall[name]["tokens_per_s"], overall[ref]["tokens_per_s"]
    return num / den if num and den else None


def _draft_free_targets(per_prompt: dict, by_kind: dict, names: list[str]) -> list[dict]:
    """The draft-free methods' goals, where the run has their methods and prompts."""
    out: list[dict] = []
    rep, prose = by_kind.get("repetitive"), by_kind.get("prose")
    if rep and "sv-suffix" in names:
        for ref, need in (("sv-lookup", TARGET_SUFFIX_VS_LOOKUP), ("sv-plain", TARGET_SUFFIX_VS_PLAIN)):
            if ref in names:
                value = rep["sv-suffix"].get(vs_key(ref))
                out.append(_at_least(f"sv-suffix vs {ref} on the repetitive group (geomean)", need, value))
    if prose and "sv-lookahead" in names and "sv-lookup" in names:
        value = prose["sv-lookahead"].get("vs_sv_lookup")
        out.append(_at_least("sv-lookahead vs sv-lookup on prose (geomean)", TARGET_LOOKAHEAD_VS_LOOKUP, value))
    if "sv-plain" in names:
        for n in (m for m in DRAFT_FREE if m in names):
            target = f"{n} vs sv-plain, worst prompt (all kinds)"
            out += _worst_prompt(per_prompt, n, "sv-plain", TARGET_DRAFT_FREE_EACH, target)
    return out


def _copy_targets(per_prompt: dict, prompts: list[BenchPrompt], names: list[str]) -> list[dict]:
    """The edit-work goals: on the edit group (else the repetitive one) and, apart, on the
    edit-heldout group, each where the run has it."""
    kinds = {p.kind for p in prompts}
    tuned = next((k for k in reversed(COPY_KINDS[:-1]) if k in kinds), None)
    out = _copy_group(per_prompt, prompts, names, tuned, TARGET_COPY_VS_LC_PLAIN) if tuned else []
    heldout = COPY_KINDS[-1]
    if heldout in kinds:  # the worst code or prose prompt is judged once, with the tuned group where it ran
        out += _copy_group(per_prompt, prompts, names, heldout, TARGET_HELDOUT_VS_LC_PLAIN, worst=not tuned)
    return out


def _copy_group(
    per_prompt: dict, prompts: list[BenchPrompt], names: list[str], kind: str, need: float, *, worst: bool = True
) -> list[dict]:
    group = [p.id for p in prompts if p.kind == kind]
    mine = [n for n in COPYING if n in names]
    if not group or not mine:
        return []
    rate = {n: geomean(per_prompt[i][n]["tokens_per_s"] for i in group) or 0.0 for n in names}
    best = max(mine, key=rate.get)
    out: list[dict] = []
    if "lc-plain" in names:
        value = geomean(_ratios(per_prompt, best, "lc-plain", group).values())
        out.append(_at_least(f"{best} vs lc-plain on the {kind} group (geomean)", need, value))
    ngram = [n for n in names if n.startswith("ll-ngram-")]
    if ngram:
        ref = max(ngram, key=rate.get)
        target = f"{best} vs llama.cpp's best n-gram method on the {kind} group (geomean)"
        value = geomean(_ratios(per_prompt, best, ref, group).values())
        out.append(_at_least(target, TARGET_COPY_VS_LL_NGRAM, value, f"best: {ref}"))
    others = [p.id for p in prompts if p.kind in GOAL_KINDS]
    if worst and others and "sv-plain" in names:
        target = f"{best} vs sv-plain, worst code or prose prompt"
        out += _worst_prompt(per_prompt, best, "sv-plain", TARGET_COPY_EACH, target, others)
    return out


FORMAT_STATS = ("grammar_ms", "forced", "forced_accepted")


def _format_targets(per_prompt: dict, prompts: list[BenchPrompt], names: list[str]) -> list[dict]:
    """The goals under an output format, on the json group: see TARGET_FORMAT_*."""
    group = [p.id for p in prompts if p.kind in FORMAT_KINDS]
    speculative = [n for n in names if n.startswith("sv-") and n != "sv-plain"]
    if not group or "sv-plain" not in names or not speculative:
        return []
    rate = {n: geomean(per_prompt[i][n]["tokens_per_s"] for i in group) or 0.0 for n in names}
    best = max(speculative, key=rate.get)
    vs_plain = geomean(_ratios(per_prompt, best, "sv-plain", group).values())
    out = [
        _at_least(f"{best} vs sv-plain, both under the schema, json group (geomean)", TARGET_FORMAT_VS_PLAIN, vs_plain)
    ]
    if "lc-plain" in names:
        value = geomean(_ratios(per_prompt, best, "lc-plain", group).values())
        out.append(
            _at_least(f"{best} vs lc-plain under LlamaGrammar, json group (geomean)", TARGET_FORMAT_VS_LC, value)
        )
    plain = [per_prompt[i]["sv-plain"] for i in group]
    share = _mean(r["grammar_ms"] / r["target_ms"] for r in plain if r.get("grammar_ms") and r.get("target_ms"))
    detail = f"masks per token over the one-token target pass T, sv-plain; {best}: " + _share(per_prompt, best, group)
    out.append(
        _row(
            "masking cost per token / one-token pass",
            f"<= {TARGET_MASK_SHARE:.0%}",
            share,
            share is not None and share <= TARGET_MASK_SHARE,
            detail,
        )
    )
    checks = [c for i in group for n in names for c in per_prompt[i][n].get("format_check") or []]
    finished = [c for c in checks if not c.startswith("cut by the token limit")]
    valid = sum(c == "valid" for c in finished) / len(finished) if finished else None
    detail = f"{len(finished)} finished answers; {len(checks) - len(finished)} cut by the token limit"
    out.append(
        _row("finished answers valid, json group", "100%", valid, valid == 1.0 if valid is not None else None, detail)
    )
    return out


def _share(per_prompt: dict, name: str, group: list[str]) -> str:
    rows = [per_prompt[i][name] for i in group]
    share = _mean(r["grammar_ms"] / r["target_ms"] for r in rows if r.get("grammar_ms") and r.get("target_ms"))
    return "n/a" if share is None else f"{share:.1%}"


def _best_assisted(names: list[str], overall: dict, *, of: str) -> str | None:
    """The fastest of transformers' assisted settings in the run, as shipped (`of` "") or
    in one of the variants with a fix of specviz's (`of` GATHERED or PACKED); the goals are against
    transformers as shipped. hf-assisted* and hf-universal* never share a run: one needs the
    draft to share the target's tokenizer, the other needs it not to."""
    assisted = [n for n in names if n.startswith(("hf-assisted", "hf-universal")) and variant(n) == of]
    return max(assisted, key=lambda n: overall[n]["tokens_per_s"] or 0, default=None)


def _prompt_rows(
    samples: dict[str, list[Sample]], methods: list[Method], opts: BenchOptions, stop: set[int], cost
) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for m in methods:
        runs = samples[m.name]
        row: dict[str, Any] = {
            "tokens_per_s": statistics.median(s.tokens_per_s for s in runs),
            "wall_s": statistics.median(s.wall_s for s in runs),
            "new_tokens": statistics.median(s.new_tokens for s in runs),
            "tokens_per_s_runs": [s.tokens_per_s for s in runs],
            "stop_reason": runs[0].stats.get("stop_reason"),
        }
        for key in (
            "acceptance",
            "mean_overlap",
            "tokens_per_round",
            "mean_k",
            "target_ms",
            "draft_ms",
            "rounds",
            *FORMAT_STATS,
        ):
            values = [s.stats[key] for s in runs if s.stats.get(key) is not None]
            if values:
                row[key] = statistics.median(values)
        if runs[0].stats.get("format_check"):
            row["format_check"] = [s.stats.get("format_check") for s in runs]
        if runs[0].stats.get("by_position"):  # the first run's counts: repeats of a greedy run are the same
            row["by_position"] = runs[0].stats["by_position"]
        rows[m.name] = row
    for name, row in rows.items():
        for ref in ("hf-plain", "sv-plain"):
            if ref in rows and rows[ref]["tokens_per_s"]:
                row["speedup_" + vs_key(ref)] = row["tokens_per_s"] / rows[ref]["tokens_per_s"]
        _predict(row, rows.get("sv-plain"), cost)
    if opts.temperature == 0:
        ref_name = plain_reference(samples)
        if ref_name:
            ref = _trim(samples[ref_name][0].token_ids, stop)
            for name, row in rows.items():
                row.update(_compare(ref, [_trim(s.token_ids, stop) for s in samples[name]], ref_name))
    return rows


def _predict(row: dict, plain: dict | None, cost) -> None:
    """The theory's speedup from this run's measured alpha, mean k, T and D.

    `predicted_speedup` is the textbook formula with T = one plain-decoding step (from
    sv-plain on the same prompt) and a verify pass assumed to cost the same T;
    `predicted_speedup_cost` replaces that assumption with the measured V(k+1), the cost
    model's curve at this run's level: V(k+1) * T / V(1). A shared machine's speed drifts
    between the load and the runs far more than the curve's shape does."""
    if row.get("acceptance") is None or not row.get("mean_k") or not row.get("draft_ms"):
        return
    alpha, k, d = row["acceptance"], row["mean_k"], row["draft_ms"]
    t1 = plain.get("target_ms") if plain else None
    t1 = t1 or (cost.target if cost else None)
    if t1:
        row["predicted_speedup"] = _interp_k(k, lambda kk: theory.speedup(alpha, kk, t1, d))
    if cost is not None:
        level = t1 / cost.target if t1 else 1.0
        at_level = CostModel({n: v * level for n, v in cost.verify.items()}, d)
        row["predicted_speedup_cost"] = _interp_k(
            k, lambda kk: theory.speedup_with_cost(alpha, kk, at_level, t1 or cost.target)
        )
    if row.get("speedup_vs_sv_plain") and row.get("predicted_speedup"):
        row["measured_over_predicted"] = row["speedup_vs_sv_plain"] / row["predicted_speedup"]
    if row.get("speedup_vs_sv_plain") and row.get("predicted_speedup_cost"):
        row["measured_over_predicted_cost"] = row["speedup_vs_sv_plain"] / row["predicted_speedup_cost"]


def _interp_k(k: float, f) -> float:
    """f at a fractional mean k, linear between the whole k on either side."""
    lo = math.floor(k)
    return f(lo) if k == lo else (lo + 1 - k) * f(lo) + (k - lo) * f(lo + 1)


def _trim(ids: list[int], stop: set[int]) -> list[int]:
    ids = list(ids)
    while ids and ids[-1] in stop:
        ids.pop()
    return ids


def _compare(ref: list[int], outs: list[list[int]], ref_name: str) -> dict:
    """Same tokens as the reference? Where not, the first position that differs. A run that
    stopped early on its own (EOS) is compared over the tokens it has."""
    for out in outs:
        n = min(len(ref), len(out))
        first = next((i for i in range(n) if ref[i] != out[i]), None)
        if first is None and len(ref) != len(out):
            first = n
        if first is not None:
            return {"identical": False, "first_divergence": first, "reference": ref_name}
    return {"identical": True}


def _mismatches(per_prompt: dict, names: list[str]) -> list[dict]:
    return [
        {"prompt": pid, "method": n, "first_divergence": rows[n]["first_divergence"], "reference": rows[n]["reference"]}
        for pid, rows in per_prompt.items()
        for n in names
        if rows[n].get("identical") is False
    ]


def _row(target: str, goal: str, value: float | None, met: bool | None, detail: str = "") -> dict:
    """One line of the targets table; `met` is None for a figure shown for information."""
    return {"target": target, "goal": goal, "value": value, "met": met, "detail": detail}


def _at_least(target: str, need: float, value: float | None, detail: str = "") -> dict:
    """A goal met where `value` is `need` or more."""
    return _row(target, f">= {need:.2f}", value, value is not None and value >= need, detail)


def _info(target: str, value: float | None, detail: str = "") -> dict:
    """A figure shown beside the goals, for information."""
    return _row(target, "(for information)", value, None, detail)


def _targets(
    per_prompt: dict, overall: dict, names: list[str], best_assisted: str | None, opts: BenchOptions
) -> list[dict]:
    """The speed goals above, checked on this run where its methods allow."""
    adaptive = "sv-adaptive" if "sv-adaptive" in names else None
    return (
        _assisted_targets(overall, names, adaptive, best_assisted, opts)
        + _plain_targets(per_prompt, overall, names, adaptive)
        + _fixed_k_targets(per_prompt, overall, names, adaptive)
        + _theory_targets(per_prompt, overall, names, adaptive)
        + _event_cost_targets(overall, names, adaptive)
        + _universal_targets(overall, names, opts)
    )


def _assisted_targets(
    overall: dict, names: list[str], adaptive: str | None, best_assisted: str | None, opts: BenchOptions
) -> list[dict]:
    """Adaptive k against transformers' assisted generation as shipped (the goal), and against
    the variants with a fix of specviz's; sv-plain against hf-plain in those variants."""
    out = []
    if adaptive and best_assisted:
        v = overall[adaptive]["vs_best_assisted"]
        need = TARGET_VS_ASSISTED_SAMPLING if opts.temperature > 0 else TARGET_VS_ASSISTED
        name = "adaptive k vs best transformers assisted (geomean tokens/s)"
        out.append(_at_least(name, need, v, f"best assisted setting: {best_assisted}"))
    for suffix, what in ((GATHERED, "LM-head slow path removed"), (PACKED, "through packed weights")):
        best = _best_assisted(names, overall, of=suffix)
        if adaptive and best and overall[best]["tokens_per_s"]:
            name = f"adaptive k vs best transformers assisted, {what} (geomean)"
            out.append(_info(name, _over(overall, adaptive, best), f"best: {best}"))
        if "sv-plain" in names and "hf-plain" + suffix in names:
            v = _over(overall, "sv-plain", "hf-plain" + suffix)
            out.append(_info(f"sv-plain vs hf-plain{suffix} (geomean tokens/s)", v))
    return out


def _worst_prompt(per_prompt: dict, name: str, base: str, need: float, target: str, ids=None) -> list[dict]:
    """`name` against `base` on the prompt (of `ids`, or all) where it does worst; none where
    `base` never ran."""
    ratios = _ratios(per_prompt, name, base, ids)
    if not ratios:
        return []
    worst = min(ratios, key=ratios.get)
    return [_at_least(target, need, ratios[worst], f"worst: {worst}")]


def _plain_targets(per_prompt: dict, overall: dict, names: list[str], adaptive: str | None) -> list[dict]:
    """Adaptive k never slower than plain decoding, and specviz's plain loop as fast as transformers'."""
    out = [
        row
        for plain in ("sv-plain", "hf-plain")
        if adaptive and plain in names
        for row in _worst_prompt(
            per_prompt, adaptive, plain, TARGET_NEVER_SLOWER, f"adaptive k vs {plain}, worst prompt"
        )
    ]
    if "sv-plain" in names and "hf-plain" in names:
        v = _over(overall, "sv-plain", "hf-plain")
        out.append(_at_least("sv-plain vs hf-plain (geomean tokens/s)", TARGET_PLAIN, v))
        out += _worst_prompt(
            per_prompt, "sv-plain", "hf-plain", TARGET_PLAIN_EACH, "sv-plain vs hf-plain, worst prompt"
        )
    return out


def _fixed_k_targets(per_prompt: dict, overall: dict, names: list[str], adaptive: str | None) -> list[dict]:
    """Adaptive k against the best fixed k in hindsight, over the run and per prompt."""
    fixed = [n for n in names if n.startswith("sv-k")]
    if not (adaptive and fixed):
        return []
    best = max(fixed, key=lambda n: overall[n]["tokens_per_s"] or 0)
    per = geomean(
        rows[adaptive]["tokens_per_s"] / max(rows[n]["tokens_per_s"] for n in fixed) for rows in per_prompt.values()
    )
    return [
        _at_least(
            "adaptive k vs best fixed k in hindsight (geomean)",
            TARGET_VS_BEST_FIXED,
            _over(overall, adaptive, best),
            f"best fixed: {best}",
        ),
        _info("adaptive k vs best fixed k per prompt (geomean)", per, "the best k chosen per prompt"),
        *_worst_vs_better(per_prompt, adaptive, ["sv-plain", *fixed]),
    ]


def _worst_vs_better(per_prompt: dict, adaptive: str, others: list[str]) -> list[dict]:
    """Adaptive k on each prompt against the better there of plain decoding and every fixed k."""
    ratios = {
        pid: rows[adaptive]["tokens_per_s"] / best
        for pid, rows in per_prompt.items()
        if rows.get(adaptive, {}).get("tokens_per_s")
        and (best := max((rows[n].get("tokens_per_s") or 0) for n in others if n in rows))
    }
    if not ratios:
        return []
    worst = min(ratios, key=ratios.get)
    target = "adaptive k vs the better of plain and fixed k, worst prompt"
    return [_at_least(target, TARGET_VS_BETTER_EACH, ratios[worst], f"worst: {worst}")]


def _theory_targets(per_prompt: dict, overall: dict, names: list[str], adaptive: str | None) -> list[dict]:
    """Measured against predicted speedup for adaptive and each fixed k.

    The goal is judged against the theory the engine chooses k by (a verify pass costs the
    measured V(k+1)); the textbook formula, which prices it as one plain step, is shown
    beside it: where V(n) grows with n (an fp32 CPU) that assumption is what fails."""
    out = []
    for name in [n for n in names if n == adaptive or n.startswith("sv-k")]:
        measured = overall[name].get("speedup_vs_sv_plain")
        ratio = geomean(rows[name].get("measured_over_predicted_cost") for rows in per_prompt.values())
        if ratio is not None:
            detail = f"measured {measured:.2f}x, predicted {overall[name]['predicted_speedup_cost']:.2f}x"
            target = f"{name}: measured / predicted speedup (measured V(n))"
            out.append(_at_least(target, TARGET_VS_THEORY, ratio, detail))
        flat = geomean(rows[name].get("measured_over_predicted") for rows in per_prompt.values())
        if flat is not None:
            detail = f"measured {measured:.2f}x, predicted {overall[name]['predicted_speedup']:.2f}x (a verify pass priced as one plain step)"
            out.append(_info(f"{name}: measured / predicted speedup (flat-T formula)", flat, detail))
    return out


def _event_cost_targets(overall: dict, names: list[str], adaptive: str | None) -> list[dict]:
    """What the full event stream costs against the minimal one."""
    if not (adaptive and "sv-adaptive-min" in names):
        return []
    cost = 1 - _over(overall, adaptive, "sv-adaptive-min")
    name = "event stream cost (1 - full / minimal tokens/s)"
    return [_row(name, f"<= {TARGET_EVENT_COST:.0%}", cost, cost <= TARGET_EVENT_COST)]


def _universal_targets(overall: dict, names: list[str], opts: BenchOptions) -> list[dict]:
    """sv-text and sv-intersection against the best of transformers' hf-universal* settings,
    by geometric-mean tokens/s. transformers drafts through text when greedy and on the
    vocabulary intersection when sampling, so the target is sv-text's in a greedy run and
    sv-intersection's in a sampling run; the other method is shown for information."""
    universal = [n for n in names if n.startswith("hf-universal") and not variant(n) and overall[n]["tokens_per_s"]]
    if not universal:
        return []
    best = max(universal, key=lambda n: overall[n]["tokens_per_s"])
    sampling = opts.temperature > 0
    hf_mode = "sampling, vocabulary intersection" if sampling else "greedy, through text"
    out = []
    for name, counts in (("sv-text", not sampling), ("sv-intersection", sampling)):
        if name not in names or not overall[name]["tokens_per_s"]:
            continue
        v, target = _over(overall, name, best), f"{name} vs transformers {hf_mode} (geomean tokens/s)"
        detail = f"best transformers setting: {best}"
        out.append(_at_least(target, TARGET_VS_UNIVERSAL, v, detail) if counts else _info(target, v, detail))
    return out


def plain_reference(names) -> str | None:
    """The run every speedup and "same tokens" is against: transformers' plain decoding, else specviz's."""
    return next((n for n in ("hf-plain", "sv-plain") if n in names), None)


def vs_key(ref: str) -> str:
    """The key of a figure against `ref`: vs_sv_plain for sv-plain."""
    return "vs_" + ref.replace("-", "_")


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None
