"""Which runtime `auto` runs a pair on: the one whose measured costs promise the higher rate
for speculative decoding that actually drafts.

A runtime's rate is read off its measured cost model (V(n) and D, `costs.measure`)
at the cost-aware policy's best k >= 1 for a typical acceptance (PRIOR_ALPHA): the page
exists to show drafting, so a runtime is judged by what a drafting run gets, and its plain
rate (1000 / V(1)) is reported beside it. Each runtime's figures are recorded when a pair
is loaded on it and kept in the cache, keyed by data: the pair, the machine (CPU name and
flags), the threads and both libraries' versions.

On a cold cache `auto` starts on llama.cpp where it can (the GGUF files load in seconds;
torch first converts them, which takes minutes), and names torch as untimed, which the page
then prepares and times in the background (engine.runtime_prepare). SPECVIZ_RUNTIME
overrides the choice.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from specviz import theory
from specviz.cost_model import CostModel, kept, older_shape
from specviz.errors import UserError, shown
from specviz.choices import AUTO, LLAMACPP, RUNTIMES, TORCH
from specviz.settings import MAX_K

# The acceptance a choice assumes before this pair has run: typical of a same-family pair
# (measured ones are in docs/BENCHMARKS.md).
PRIOR_ALPHA = 0.8
ENV = "SPECVIZ_RUNTIME"


@dataclass(frozen=True)
class Choice:
    """The runtime chosen and why; once the pair is loaded (engine.load, `ModelPair.runtime_choice`)
    also what was asked for, each runtime's rates measured here and those being timed now."""

    runtime: str
    reason: str
    # Runtimes `auto` could have picked but has no measurement of here yet
    # (engine.runtime_prepare times them in the background).
    untimed: tuple[str, ...] = ()
    requested: str = AUTO
    spec: str = ""
    rates: dict = field(default_factory=dict)  # {runtime: `rates`}
    preparing: tuple[str, ...] = ()


# Load options only the torch runtime has (engine.load's), with the environment variables
# that set them; llama.cpp runs the GGUF files as they are, on the CPU.
TORCH_OPTIONS = {
    "device": "SPECVIZ_DEVICE",
    "dtype": "SPECVIZ_DTYPE",
    "int8_draft": "SPECVIZ_INT8_DRAFT",
    "device_map": "SPECVIZ_DEVICE_MAP",
    "max_memory": "SPECVIZ_MAX_MEMORY",
}


def choose(spec, requested: str = AUTO, *, options: dict | None = None, env=os.environ) -> Choice:
    """The runtime to load `spec` on, and why. `options`: the load's other options; one that
    only torch has (a device, a precision, a device map) makes `auto` torch, and is refused
    beside an explicit llama.cpp."""
    if requested not in RUNTIMES:
        raise UserError(f"runtime must be one of {', '.join(RUNTIMES.names)} (got {shown(requested)})")

    def given(x) -> bool:
        return x is not None and str(x).strip().lower() not in ("", "auto", "none")

    torch_only = [
        name for name, var in TORCH_OPTIONS.items() if given((options or {}).get(name)) or given(env.get(var))
    ]
    if requested not in (AUTO, TORCH) and torch_only:
        raise UserError(
            f"{torch_only[0].replace('_', '-')} applies to the torch runtime only; the {requested} runtime loads "
            "its own files as they are"
        )
    if requested != AUTO:
        return Choice(requested, "chosen")
    if torch_only:
        return Choice(TORCH, f"{torch_only[0].replace('_', '-')} given, which only torch has")
    import torch

    if torch.cuda.is_available():
        return Choice(TORCH, "a GPU is here, and this llama.cpp build runs on the CPU")
    asked = (env.get(ENV) or AUTO).strip()
    if asked not in RUNTIMES:
        raise UserError(f"{ENV} must be one of {', '.join(RUNTIMES.names)} (got {asked!r})")
    if asked != AUTO:
        return Choice(asked, f"{ENV}={asked}")
    why_not = _llamacpp_unusable(spec)
    if why_not:
        return Choice(TORCH, why_not)
    rates = recorded(spec)
    if TORCH in rates and LLAMACPP in rates:
        best = max(rates, key=lambda r: rates[r]["speculative"])
        return Choice(best, "measured here: the faster drafting of the two")
    if rates.keys() == {TORCH}:
        return Choice(TORCH, "measured here; llama.cpp not yet timed", untimed=(LLAMACPP,))
    return Choice(
        LLAMACPP,
        "not yet timed here: llama.cpp runs the GGUF files as they are and is ready in seconds",
        untimed=(TORCH,),
    )


def _llamacpp_unusable(spec) -> str | None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "llama-cpp-python is not installed"
    from specviz.models.catalogue.sources import resolve

    try:
        plan = resolve(spec)
    except UserError:
        return "the pair is not a preset or GGUF files"  # the load says what is wrong with it
    refs = [r for r in (plan.target, plan.draft) if r is not None]
    if any(r.kind not in ("bundled", "gguf") for r in refs):
        return "the pair is not GGUF files, which llama.cpp needs"
    return None


def rates(cost: CostModel, alpha: float = PRIOR_ALPHA) -> dict:
    """Expected tokens/s of plain decoding and of drafting at the best k >= 1."""
    per_ms = {k: theory.tokens_per_round(alpha, k) / cost.round_ms(k) for k in range(1, MAX_K + 1)}
    best = max(per_ms, key=per_ms.get)
    return {
        "plain": 1000.0 / cost.target,
        "speculative": 1000.0 * per_ms[best],
        "k": best,
        "alpha": alpha,
        "cost": cost.to_dict(),  # V(n) and D as `CostModel` writes them, as a trace keeps them too
    }


def record(spec, runtime: str, cost: CostModel) -> dict:
    """Keep `runtime`'s rates for `spec` on this machine; returns them."""
    path = _path(spec)
    data = _read(path)
    data[runtime] = rates(cost)
    from specviz.models.files.cache import write_json

    write_json(path, data)
    return data[runtime]


def recorded(spec) -> dict:
    """Each runtime's kept rates for `spec` here (costs kept as {"V", "D"} read as a cost
    model's dict); one kept without costs that read as a cost model reads as untimed."""
    out = {}
    for k, v in _read(_path(spec)).items():
        if k in RUNTIMES and isinstance(v, dict):
            cost = v.get("cost", older_shape(v))
            if kept(cost) is not None:
                out[k] = {**v, "cost": cost}
    return out


def plain_beats_drafting(rates_by_runtime: dict) -> str | None:
    """A plain sentence when some runtime's plain decoding is faster than every drafting run."""
    if not rates_by_runtime:
        return None
    best_plain = max(rates_by_runtime, key=lambda r: rates_by_runtime[r]["plain"])
    top = rates_by_runtime[best_plain]["plain"]
    if all(top > r["speculative"] for r in rates_by_runtime.values()):
        return (
            f"on this machine {best_plain}'s plain decoding ({top:.1f} tok/s) is faster than speculative decoding "
            "on any runtime measured: drafting shows how it works here, not a speedup"
            + _copying_pays(rates_by_runtime[best_plain])
        )
    return None


# A round of edit work inside a copied span: this many copied tokens verified in one pass, all accepted.
COPIED = 12


def _copying_pays(rates: dict) -> str:
    """What a draft-free drafter gains where the answer copies its input, from the runtime's
    measured pass costs: a round that copies COPIED tokens gives COPIED + 1 for one pass."""
    cost = CostModel.from_dict(rates["cost"])
    ratio = cost.verify_ms(COPIED + 1) / cost.target
    if (COPIED + 1) / ratio <= 1:
        return ""
    return (
        f". The suffix drafter pays on edit work, where the answer copies its input (the Edit examples): a pass over "
        f"{COPIED + 1} tokens costs {ratio:.1f} one-token passes here, so a round that copies {COPIED} tokens at once "
        f"runs up to {(COPIED + 1) / ratio:.1f}\u00d7 plain decoding"
    )


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _path(spec) -> Path:
    import torch

    from specviz.models.files.cache import cache_root, digest
    from specviz.lm.timing import cpu_flags, cpu_name

    try:
        import llama_cpp

        lcpp = llama_cpp.__version__
    except ImportError:
        lcpp = None
    flags = cpu_flags()
    key = {
        "pair": str(spec),
        "cpu": cpu_name(),
        # The ':' of cpuinfo's flags line is part of the key: without it every choice recorded on
        # this machine would be looked for under another file name and its pair measured again.
        "flags": sorted(flags | {":"}) if flags else [],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "llama-cpp-python": lcpp,
    }
    return cache_root() / "runtime-choice" / f"{digest(key)}.json"
