"""The decoding methods the bench compares, and how to run one of them once.

Names: `sv-*` run specviz's engine, `hf-*` run transformers' `generate`.

    sv-plain              target alone
    sv-k{K}               speculative, draft model, fixed k
    sv-adaptive           speculative, draft model, the cost-aware policy (the page's default;
                          events recorded in full)
    sv-adaptive-min       the same with events reduced to the minimum: the event stream's cost
    sv-heuristic          speculative, draft model, transformers' +2/-1 schedule
    sv-tree{N}x{B}        speculative, a token tree of N nodes, at most B children each, from the draft model
    sv-lookup             speculative, prompt-lookup drafter (no draft model), cost-aware
    sv-early-exit         speculative, the target's own first layers as the drafter, cost-aware
    hf-plain              transformers, target alone
    hf-assisted           transformers assisted generation, its default schedule
    hf-assisted-k{K}      the same with a constant k
    hf-lookup             transformers prompt lookup (10 tokens)
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from specviz.bench import hf_baselines
from specviz.errors import UserError
from specviz.settings import GenerationSettings

FAMILY_NAMES = {"sv": "specviz", "hf": "transformers"}


@dataclass(frozen=True)
class Method:
    name: str
    family: str  # "sv" or "hf"
    kind: str  # plain | speculative | lookup | early-exit | assisted
    k: int | None = None  # fixed draft length; None: adaptive / the library's default schedule
    tree: tuple[int, int] | None = None  # specviz token tree: (nodes, width)
    record: str = "full"  # specviz only: "full" or "minimal" events
    policy: str = "cost-aware"  # specviz's draft-length policy when k is None

    @property
    def needs_draft(self) -> bool:
        return self.kind in ("speculative", "assisted", "tree")


@dataclass
class Sample:
    """One timed run of one method on one prompt."""

    token_ids: list[int]
    wall_s: float
    stats: dict[str, Any] = field(default_factory=dict)
    trace: Any = None  # a specviz run's whole trace, saved to --out/traces for the page

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def record(self) -> dict[str, Any]:
        """What bench.json keeps of the run (not the trace, which goes to its own file)."""
        return {**{k: getattr(self, k) for k in RECORDED}, **self.stats}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> "Sample":
        stats = {k: v for k, v in d.items() if k not in RECORDED}
        return cls(token_ids=list(d["token_ids"]), wall_s=float(d["wall_s"]), stats=stats)


# A sample's own fields in bench.json, beside its method's stats.
RECORDED = ("tokens_per_s", "wall_s", "new_tokens", "token_ids")


def default_methods(ks: list[int]) -> list[str]:
    return (
        ["hf-plain", "hf-assisted", *[f"hf-assisted-k{k}" for k in ks], "hf-lookup"]
        + ["sv-plain", *[f"sv-k{k}" for k in ks], "sv-adaptive", "sv-adaptive-min", "sv-lookup", "sv-early-exit"]
    )


def parse_method(name: str) -> Method:
    fixed = {
        "sv-plain": Method(name, "sv", "plain"),
        "sv-adaptive": Method(name, "sv", "speculative"),
        "sv-adaptive-min": Method(name, "sv", "speculative", record="minimal"),
        "sv-heuristic": Method(name, "sv", "speculative", policy="heuristic"),
        "sv-lookup": Method(name, "sv", "lookup"),
        "sv-early-exit": Method(name, "sv", "early-exit"),
        "hf-plain": Method(name, "hf", "plain"),
        "hf-assisted": Method(name, "hf", "assisted"),
        "hf-lookup": Method(name, "hf", "lookup"),
    }
    if name in fixed:
        return fixed[name]
    t = re.fullmatch(r"sv-tree(\d+)x(\d+)", name)
    if t and 1 <= int(t.group(1)) <= 64 and 1 <= int(t.group(2)) <= 8:
        return Method(name, "sv", "tree", tree=(int(t.group(1)), int(t.group(2))))
    m = re.fullmatch(r"(sv-k|hf-assisted-k)(\d+)", name)
    if m and 1 <= int(m.group(2)) <= 16:
        k = int(m.group(2))
        return Method(name, "sv", "speculative", k=k) if m.group(1) == "sv-k" else Method(name, "hf", "assisted", k=k)
    raise UserError(
        f"unknown method {name!r}: use sv-plain, sv-k<K>, sv-adaptive, sv-adaptive-min, sv-heuristic, sv-lookup, "
        "sv-early-exit, sv-tree<N>x<B>, hf-plain, hf-assisted, hf-assisted-k<K> or hf-lookup (K from 1 to 16, N to 64, B to 8)"
    )


def sv_settings(method: Method, base: GenerationSettings, k_max: int) -> GenerationSettings:
    """The specviz settings one method runs with; `base` holds temperature, length, seed."""
    if method.kind == "plain":
        return replace(base, mode="plain")
    if method.kind == "tree":
        nodes, width = method.tree
        return replace(base, mode="speculative", drafter="tree", k=k_max, policy="fixed", tree_nodes=nodes, tree_width=width)
    drafter = {"speculative": "model", "lookup": "lookup", "early-exit": "early-exit"}[method.kind]
    if method.k is not None:
        return replace(base, mode="speculative", drafter=drafter, k=method.k, policy="fixed")
    return replace(base, mode="speculative", drafter=drafter, k=k_max, policy=method.policy)


def run_specviz(pair, prompt: str, method: Method, settings: GenerationSettings) -> Sample:
    from specviz.engine.generation import run

    _sync(pair.device)
    t0 = time.perf_counter()
    trace = run(pair, prompt, settings, record=method.record)
    _sync(pair.device)
    wall = time.perf_counter() - t0
    return Sample(token_ids=list(trace.token_ids), wall_s=wall, stats=trace_stats(trace), trace=trace)


def trace_stats(trace) -> dict[str, Any]:
    """What the bench reports from a specviz run: acceptance, tokens per round, T, D, k."""
    s = trace.summary
    rounds = [e for e in trace.events if getattr(e, "type", None) == "round"]
    stats = {
        "stop_reason": s.stop_reason,
        "engine_wall_s": s.wall_s,
        "target_ms": s.target_ms,
        "draft_ms": s.draft_ms,
    }
    if trace.mode == "speculative" and s.rounds:
        stats.update(rounds=s.rounds, tokens_per_round=s.tokens_per_round, mean_k=sum(r.k for r in rounds) / len(rounds) if rounds else None)
        if s.drafted:  # acceptance is undefined when nothing was drafted (lookup found no match)
            stats.update(acceptance=s.acceptance_rate, mean_overlap=s.mean_overlap)
    else:
        stats["draft_ms"] = None
    return stats


def run_transformers(pair, input_ids: torch.Tensor, method: Method, config, seed: int) -> Sample:
    if method.kind == "plain":
        r = hf_baselines.generate(pair.target, input_ids, config, seed=seed)
    elif method.kind == "assisted":
        r = hf_baselines.generate(pair.target, input_ids, config, seed=seed, assistant=pair.draft, assistant_k=method.k)
    else:
        r = hf_baselines.generate(pair.target, input_ids, config, seed=seed, prompt_lookup=hf_baselines.PROMPT_LOOKUP_TOKENS)
    return Sample(token_ids=r.token_ids, wall_s=r.wall_s, stats={"stop_reason": "eos" if len(r.token_ids) < config.max_new_tokens else "max_new_tokens"})


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
