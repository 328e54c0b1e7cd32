"""Run one prompt through every entry point on one loaded pair and print what each says.

    python scripts/one_story.py [--pair qwen-coder] [--max-new-tokens 128] [--json]

The library (`engine.run`), the CLI (`generate --json`'s code), the page and the generate API
(`app.runner.stream`, which both call) and the bench (`sv-adaptive`) run the same default
settings (the cost-aware policy) on the same model objects. Greedy tokens must be the same
everywhere; the k of each round may differ where the policy's own timing of its rounds
differs (it reads the clock). Then a plain run of the same prompt, and the page's Theory and
stats numbers, so the plain speed the cost model measured at load (plain_ms_per_token) can
be checked against a measured plain run.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz import viz  # noqa: E402
from specviz.app import runner  # noqa: E402
from specviz.app.config import PageConfig  # noqa: E402
from specviz.app.theory_tab import prediction  # noqa: E402
from specviz.workshop.bench.methods import parse_method, run_specviz, sv_settings  # noqa: E402
from specviz.engine import run  # noqa: E402
from specviz.workshop import generate_cli as cli  # noqa: E402
from specviz.engine.load import load  # noqa: E402
from specviz.events import RoundEvent, Trace  # noqa: E402
from specviz.settings import DEFAULTS  # noqa: E402


def ks(trace: Trace) -> list[int]:
    return [e.k for e in trace.events if isinstance(e, RoundEvent)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen-coder")
    ap.add_argument(
        "--prompt", default=json.loads((ROOT / "assets" / "examples.json").read_text())["examples"][0]["prompt"]
    )
    ap.add_argument("--max-new-tokens", type=int, default=DEFAULTS.max_new_tokens)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    pair = load(args.pair, progress=lambda f, m: print(f"[{f:4.0%}] {m}", file=sys.stderr))
    print(f"loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    settings = replace(DEFAULTS, max_new_tokens=args.max_new_tokens)
    run(pair, args.prompt, replace(settings, max_new_tokens=8))  # warm-up, not reported

    traces: dict[str, Trace] = {}
    traces["library"] = run(pair, args.prompt, settings)
    out = io.StringIO()
    cli.generate(pair, args.prompt, settings, as_json=True, out=out)
    traces["cli"] = Trace.from_json(out.getvalue())
    *_, traces["page/api"] = runner.stream(
        args.pair, args.prompt, settings, "one-story", PageConfig(preload=False), min_interval_s=0.0
    )
    method = parse_method("sv-adaptive")
    traces["bench"] = run_specviz(pair, args.prompt, method, sv_settings(method, settings, settings.k)).trace
    plain = run(pair, args.prompt, replace(settings, mode="plain"))

    ref = traces["library"]
    rows = {}
    for name, t in traces.items():
        s = t.summary
        same_k = sum(a == b for a, b in zip(ks(t), ks(ref)))
        rows[name] = {
            "policy": s.policy,
            "tokens": s.new_tokens,
            "rounds": s.rounds,
            "same_tokens": t.token_ids == ref.token_ids,
            "rounds_with_the_librarys_k": f"{same_k}/{max(len(ks(t)), len(ks(ref)))}",
            "tokens_per_s": round(s.tokens_per_s, 3),
            "speedup_vs_plain": round(s.speedup_vs_plain, 3),
            "acceptance": round(s.acceptance_rate, 3),
        }
    page = traces["page/api"]
    pred = prediction(page, plain)
    stats = viz.live_stats(page.events)
    result = {
        "pair": pair.name,
        "dtype": str(pair.dtype),
        "draft": pair.draft_precision,
        "prompt": args.prompt,
        "entry_points": rows,
        "plain_ms_per_token (cost model, at load)": round(page.summary.plain_ms_per_token, 1),
        "plain speed predicted by it (tok/s)": round(1000 / page.summary.plain_ms_per_token, 3),
        "plain run measured (tok/s)": round(plain.summary.tokens_per_s, 3),
        "plain run / cost model": round(plain.summary.tokens_per_s * page.summary.plain_ms_per_token / 1000, 3),
        "plain run same tokens as speculative": plain.token_ids == ref.token_ids,
        "page stats": {
            "tokens_per_s": round(stats.tokens_per_s, 3),
            "acceptance": round(stats.acceptance, 3),
            "tokens_per_round": round(stats.tokens_per_round, 3),
        },
        "theory tab": None
        if pred is None
        else {
            "alpha": round(pred.alpha, 3),
            "k": pred.k,
            "T_ms": round(pred.target_ms, 1),
            "T_source": pred.target_ms_source,
            "D_ms": round(pred.draft_ms, 1),
            "V_ms": round(pred.verify_ms, 1),
            "predicted_speedup_flat_T": round(pred.predicted_speedup, 3),
            "predicted_speedup_measured_V": round(pred.predicted_speedup_measured_cost, 3),
            "measured_speedup_vs_T": round(pred.measured_speedup or 0, 3),
            "measured_speedup_vs_plain_run": round(pred.plain_run_speedup or 0, 3),
            "best_k": pred.best_k,
        },
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
