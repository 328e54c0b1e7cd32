"""How near the cost-aware policy stops to the best any stopping rule could: real drafts, simulated clock.

    python scripts/stopping_replay.py BENCH_OUT [--json]

BENCH_OUT is the --out folder of a greedy bench run with sv-adaptive in it. For each prompt
the draft model, loaded as that run had it, is fed the target's greedy output one token at a
time and records at every position whether its top token is the target's and its
confidence in it. In greedy decoding that is all that decides a round: a drafted token is
accepted when it is the target's, and the round ends at the first one that is not. Each
stopping rule is then replayed over those rows on the run's own costs: V(n) from its cost
model, D and the loop's per-round cost from its sv-adaptive traces (prompt prefill left out:
every rule pays it alike). Rules:

- cost-aware: the real `CostAwareLength` on a simulated clock;
- transformers' default (up to 20 drafts, stopping after one with confidence < 0.4) and
  its constant k = 2, 4, 8;
- a fixed confidence threshold (cap 20): the best single threshold over all prompts, and
  the best threshold for each prompt chosen in hindsight;
- perfect: drafts exactly the tokens that will be accepted, an upper bound no rule reaches.

Drafts after a miss are replayed with the confidence the draft had on the target's prefix
(it would have seen its own wrong token); they are wasted either way, only where the round
stops can move. Simulated tokens/s, not measured: the bench measures.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.workshop.bench.summary import geomean  # noqa: E402
from specviz.drafters.cost_aware import CostAwareLength  # noqa: E402
from specviz.cost_model import CostModel  # noqa: E402
from specviz.settings import default_k  # noqa: E402

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
HF_CAP, HF_THRESHOLD = 20, 0.4  # transformers' GenerationConfig defaults for the assistant

# One position of the target's output: (the draft's top token is the target's, its confidence)
Row = tuple[bool, float]


class Threshold:
    """Up to `cap` drafts a round, stopping after one whose confidence is under `threshold`."""

    def __init__(self, cap: int, threshold: float):
        self.cap, self.threshold = cap, threshold

    def limit(self) -> int:
        return self.cap

    def keep_going(self, confidence: float) -> bool:
        return confidence >= self.threshold

    def update(self, drafted: int, accepted: int) -> None:
        pass


class Perfect:
    """Drafts exactly the run of tokens the target will accept from here."""

    def __init__(self, rows: list[Row]):
        self.rows, self.at = rows, 0

    def limit(self) -> int:
        n = 0
        while self.at + n < len(self.rows) and self.rows[self.at + n][0]:
            n += 1
        return n

    def keep_going(self, confidence: float) -> bool:
        return True

    def update(self, drafted: int, accepted: int) -> None:
        self.at += accepted + 1


def replay(rows: list[Row], rule, cost: CostModel, overhead_ms: float, now: list[float] | None = None) -> dict:
    """Rounds over `rows` as `rule` drafts them; `now` is the clock a cost-aware rule reads
    (its value in ms, advanced here). Returns tokens/s and the rounds' shape."""
    now = now if now is not None else [0.0]
    at, rounds, drafted_total = 0, 0, 0
    while at < len(rows):
        drafted = accepted = 0
        missed = False
        for i in range(min(rule.limit(), len(rows) - at)):
            match, confidence = rows[at + i]
            drafted += 1
            if match and not missed:
                accepted += 1
            else:
                missed = True
            if not rule.keep_going(confidence):
                break
        rule.update(drafted, accepted)
        now[0] += cost.round_ms(drafted) + overhead_ms
        at += accepted + 1
        rounds += 1
        drafted_total += drafted
    return {
        "tokens_per_s": len(rows) / now[0] * 1000,
        "rounds": rounds,
        "tokens_per_round": len(rows) / rounds,
        "mean_k": drafted_total / rounds,
    }


def cost_aware(rows: list[Row], cost: CostModel, overhead_ms: float, k_max: int) -> dict:
    now = [0.0]
    rule = CostAwareLength(cost, k_max, clock=lambda: now[0] / 1000)
    return replay(rows, rule, cost, overhead_ms, now)


def table(prompts: dict[str, list[Row]], cost: CostModel, overhead_ms: float, k_max: int) -> dict:
    """Simulated tokens/s per prompt and by geometric mean for every rule."""
    per: dict[str, dict[str, float]] = {}
    for pid, rows in prompts.items():
        r = {"cost-aware": cost_aware(rows, cost, overhead_ms, k_max)["tokens_per_s"]}
        r["transformers default"] = replay(rows, Threshold(HF_CAP, HF_THRESHOLD), cost, overhead_ms)["tokens_per_s"]
        for k in (2, 4, 8):
            r[f"transformers k{k}"] = replay(rows, Threshold(k, 0.0), cost, overhead_ms)["tokens_per_s"]
        for t in THRESHOLDS:
            r[f"threshold {t}"] = replay(rows, Threshold(HF_CAP, t), cost, overhead_ms)["tokens_per_s"]
        r["perfect"] = replay(rows, Perfect(rows), cost, overhead_ms)["tokens_per_s"]
        per[pid] = r
    overall = {name: geomean(r[name] for r in per.values()) for name in next(iter(per.values()))}
    best_t = max(THRESHOLDS, key=lambda t: overall[f"threshold {t}"])
    overall["best threshold in hindsight, per prompt"] = geomean(
        max(r[f"threshold {t}"] for t in THRESHOLDS) for r in per.values()
    )
    return {"per_prompt": per, "overall": overall, "best_threshold": best_t}


def loop_costs(traces: list[dict]) -> tuple[float, float]:
    """D (ms per drafted token) and the loop's own ms per round beyond its passes, from the
    traces. Rounds up to the first that drafted are left out: they hold the prompts' reading
    (the target's prefill, then the drafter's when it drafts first)."""
    draft_ms = drafted = other = rounds = 0.0
    for t in traces:
        events = t["events"]
        first = next((i for i, e in enumerate(events) if e.get("drafted")), len(events))
        ends = [e["t_end_s"] for e in events]
        for e, start, end in zip(events[first + 1 :], ends[first:], ends[first + 1 :]):
            draft_ms += e.get("draft_ms") or 0.0
            drafted += len(e.get("drafted") or [])
            other += (end - start) * 1000 - (e.get("draft_ms") or 0.0) - (e.get("verify_ms") or 0.0)
            rounds += 1
    return draft_ms / drafted, other / rounds


def collect(pair, trace: dict) -> list[Row]:
    """The draft's top token and confidence at every position of the target's output."""
    import torch

    from specviz.lm.torch_runtime.cached import CachedLM, model_forward
    from specviz.lm.prompt import encode_prompt
    from specviz.settings import GenerationSettings

    settings = GenerationSettings(
        **{k: v for k, v in trace["settings"].items() if k in GenerationSettings.__dataclass_fields__}
    )
    lm = CachedLM(model_forward(pair.draft), pair.draft.config, torch.device("cpu"))
    rows: list[Row] = []
    with torch.inference_mode():
        logits = lm.feed(torch.tensor(encode_prompt(pair, trace["prompt"], settings)))[-1]
        for token in trace["token_ids"]:
            confidence, top = logits.float().softmax(-1).max(-1)
            rows.append((int(top) == token, float(confidence)))
            logits = lm.feed(torch.tensor([token]))[-1]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_out", help="a greedy bench run's --out folder (with sv-adaptive traces)")
    ap.add_argument("--threads", type=int, help="torch CPU threads for the draft's replay (default: torch's choice)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    from specviz.lm import load_pair

    meta = json.loads((Path(args.bench_out) / "bench.json").read_text())["meta"]
    if meta["temperature"] > 0:
        sys.exit("a greedy run is needed: at temperature > 0 acceptance is a draw, not a match")
    traces = {
        Path(f).name.split(".")[0]: json.loads(Path(f).read_text())
        for f in sorted(glob.glob(f"{args.bench_out}/traces/*.sv-adaptive.json"))
    }
    if not traces:
        sys.exit(f"no sv-adaptive traces in {args.bench_out}/traces")
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = load_pair(meta["pair"], dtype=meta["dtype"], int8_draft=meta.get("draft_precision") == "int8")
    prompts = {pid: collect(pair, t) for pid, t in traces.items()}
    d, overhead = loop_costs(list(traces.values()))
    verify = {int(n): v for n, v in meta["cost_model"]["verify"].items()}
    result = table(
        prompts, CostModel(verify=verify, draft=d), overhead, int(meta.get("k_max") or default_k("cost-aware"))
    )
    result.update(draft_ms=d, overhead_ms=overhead, verify_ms=verify, bench_out=args.bench_out)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(
        f"Replay of {len(prompts)} prompts from {args.bench_out}: D {d:.1f} ms, loop {overhead:.1f} ms a round, "
        f"V(1) {verify[1]:.0f} ms (simulated tokens/s, prefill left out)"
    )
    for name, v in result["overall"].items():
        print(f"  {name:<42} {v:6.2f}  ({v / result['overall']['cost-aware']:.3f}x cost-aware)")
    print(f"  best single threshold: {result['best_threshold']}")


if __name__ == "__main__":
    main()
