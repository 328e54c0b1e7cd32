"""What a run found about a pair, in the terms an engine's settings need.

The draft length comes two ways: the cost-aware policy's mean k over its drafting rounds, and
the best fixed k in hindsight (`best_fixed_k`), since an engine drafts a fixed number of
tokens each step. Where drafting did not pay in the run (the best fixed k is 0), the export
says so instead of pretending a k helps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specviz import run_stats
from specviz.cost_model import CostModel
from specviz.errors import UserError
from specviz.events import Event, Trace
from specviz.choices import FIXED, FREE_TEXT, SPECULATIVE
from specviz.settings import MAX_K, GenerationSettings, default_k


@dataclass
class Model:
    label: str
    hub_id: str | None  # what vLLM, SGLang and transformers load
    gguf: str | None  # what llama.cpp loads


@dataclass
class Found:
    pair: str
    target: Model
    draft: Model | None
    drafter: str  # a choices.DRAFTERS name
    k: int  # the fixed draft length to export
    k_reason: str  # where k came from, in words
    policy_mean_k: float | None = None  # mean k of the run's drafting rounds
    hindsight_k: int | None = None  # the best fixed k in hindsight (0: plain decoding was faster)
    temperature: float = 0.0
    tree_nodes: int = 0
    tree_width: int = 0
    early_exit_layers: int = 0
    suffix_max_nodes: int = 0
    output_format: str = FREE_TEXT  # the run's output format (`choices.FORMATS`) and its text
    output_spec: str = ""


def best_fixed_k(events: list[Event], cost_model: dict | None) -> int | None:
    """The fixed draft length in 0..MAX_K with the most tokens per ms over the run's finished
    drafting rounds, priced by the run's cost model (0: plain decoding). A round that accepted
    all of its n drafts is taken to reject its next one, so longer drafts are never credited
    with tokens nobody saw. None without a cost model or a drafting round."""
    if not cost_model:
        return None
    cost = CostModel.from_dict(cost_model)
    rounds = [r for r in run_stats.rounds_of(events) if run_stats.finished(r) and r.drafted]
    if not rounds:
        return None
    best, best_rate = 0, 1.0 / cost.round_ms(0)
    for k in range(1, MAX_K + 1):
        tokens = sum(min(k, r.accepted) + 1 for r in rounds)
        rate = tokens / (len(rounds) * cost.round_ms(k))
        if rate > best_rate * (1 + 1e-9):
            best, best_rate = k, rate
    return best


def models_of(pair: str) -> tuple[Model, Model | None]:
    """The pair's target and draft as an engine names them: a Hub id and a GGUF file."""
    from specviz.models.files.convert import gguf_path
    from specviz.models.catalogue.sources import resolve

    plan = resolve(pair)

    def model(ref) -> Model:
        hub = ref.location if ref.kind == "hub" else ref.fallback_hub
        gguf = str(gguf_path(ref.bundled)) if ref.bundled is not None else ref.location if ref.kind == "gguf" else None
        if ref.kind == "folder":
            hub = ref.location  # a local folder loads in vLLM, SGLang and transformers as a Hub id does
        return Model(ref.label, hub, gguf)

    return model(plan.target), model(plan.draft) if plan.draft is not None else None


def from_trace(trace: Trace) -> Found:
    """What `trace` (a finished speculative run) found."""
    if trace.mode != SPECULATIVE:
        raise UserError("a plain run drafts nothing: export needs a speculative run's trace")
    s = trace.settings
    rounds = [r for r in run_stats.rounds_of(trace.events) if r.drafted]
    mean_k = sum(len(r.drafted) for r in rounds) / len(rounds) if rounds else None
    hindsight = best_fixed_k(trace.events, trace.meta.get("cost_model"))
    drafter = s.get("drafter", "model")
    if hindsight is not None and hindsight > 0:
        k, why = hindsight, f"the best fixed k in hindsight over the run's {len(rounds)} drafting rounds"
    elif mean_k is not None and hindsight is None:
        k, why = max(1, round(mean_k)), "the cost-aware policy's mean k (no cost model in the trace for hindsight)"
    elif hindsight == 0:
        k, why = max(1, round(mean_k or 1)), "the run's mean k (no fixed k paid in it)"
    else:
        k = default_k(FIXED)
        why = (
            "the run drafted nothing to learn from (its policy found plain decoding faster), so the fixed policy's "
            "default"
        )
    target, draft = models_of(trace.pair)
    return Found(
        pair=trace.pair,
        target=target,
        draft=draft,
        drafter=drafter,
        k=k,
        k_reason=why,
        policy_mean_k=mean_k,
        hindsight_k=hindsight,
        **_shape(s),
    )


def from_settings(pair: str, settings: GenerationSettings) -> Found:
    """What to export with no run to learn from: the settings' drafter and k as they are."""
    target, draft = models_of(pair)
    return Found(
        pair=pair,
        target=target,
        draft=draft,
        drafter=settings.drafter,
        k=settings.k,
        k_reason="the k given (no run's trace to learn from)",
        **_shape(settings.to_dict()),
    )


def _shape(settings: Mapping) -> dict:
    """What an engine needs of a run's settings beside the drafter and k: the temperature, the
    sizes of a tree, an early exit and a suffix tree, and the output format."""
    sizes = ("tree_nodes", "tree_width", "early_exit_layers", "suffix_max_nodes")
    return {
        "temperature": float(settings.get("temperature") or 0.0),
        **{n: int(settings.get(n) or 0) for n in sizes},
        "output_format": settings.get("output_format") or FREE_TEXT,
        "output_spec": settings.get("output_spec") or "",
    }


def read_trace(path: str | Path) -> Trace:
    """A trace file (`generate --json` output or the page's download)."""
    from specviz.events import load_trace

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None
    return load_trace(data)
