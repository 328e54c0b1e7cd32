"""The target's precision on a CPU, chosen by measurement and cached once per machine.

For `auto` on a CPU with native bf16, the target is timed in fp32 and in bf16: a one-token
pass V(1) (a plain-decoding step, and the draft-less baseline) and an 8-token pass V(8) (a
verify pass of a round drafting 7), each after `timing.MEASURE_CONTEXT` cached tokens, the
median of `timing.REPEATS` after warm-up sweeps. The precision with the lower V(1) + V(8),
the cost of one plain step plus one typical verify pass, wins. The decision and its figures
are cached under the cache root's precision/ folder, keyed by the target, the CPU, the
thread count, the libraries and how a pass was timed.

Each precision is timed through the loop the engine runs the target in (`lm.timing`:
specviz's own loop over packed weights where it applies), since that loop's costs per
precision are what a run pays.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch

from specviz.lm import timing

from specviz.models.files import cache
from specviz.models.files.cache import cache_root, digest
from specviz.lm.pair import PrecisionChoice, dtype_name
from specviz.lm.torch_runtime.devices import DTYPES, INT8, SHORT, Measure, Placement, asked_dtype, choose_dtype
from specviz.models.errors import DeviceError

SIZES = (1, 8)


def score(costs: dict[int, float]) -> float:
    """What a precision is judged by: V(1) + V(8) in ms."""
    return costs[1] + costs[8]


def decide(costs: dict[str, dict[int, float]]) -> PrecisionChoice:
    """The precision whose measured V(1) + V(8) is lowest, with the figures as the reason."""
    costs = {name: {int(n): float(ms) for n, ms in c.items()} for name, c in costs.items()}
    best = min(costs, key=lambda name: score(costs[name]))
    figures = "; ".join(f"{SHORT.get(name, name)} V(1) {c[1]:.0f} ms, V(8) {c[8]:.0f} ms" for name, c in costs.items())
    # A name that is no measured dtype (a damaged cache) raises here, and is measured again.
    chosen = dtype_name(DTYPES[best])
    return PrecisionChoice(chosen, f"measured faster on this CPU (V(1) + V(8): {figures})", measured=costs)


# The loop the passes are timed through, in words: part of the cache key (a choice timed
# through another loop would not hold for this one).
LOOP = "specviz's loop for the runtime (lm.open_lm)"


def cache_file(target_key: str, device: torch.device) -> Path:
    import transformers

    key = {
        "target": target_key,
        "device": str(device),
        "cpu": timing.cpu_name(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sizes": list(SIZES),
        "timed through": LOOP,
    }
    return cache_root() / "precision" / f"{digest(key)}.json"


def read(path: Path) -> PrecisionChoice | None:
    try:
        d = json.loads(path.read_text())
        chosen = decide(d["costs"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or damaged: measured again
    return replace(chosen, reason=chosen.reason + " (measured once on this machine, cached)")


def write(path: Path, chosen: PrecisionChoice) -> None:
    cache.write_json(path, {"chosen": chosen.target, "costs": chosen.measured})


def measures(device: torch.device, dtype: str | torch.dtype | None, placement: Placement) -> bool:
    """Whether `choose_precision` decides by measurement (auto on a CPU with native bf16, for a
    target not spread by a device map): only then is there a cache file to read or a wait."""
    return choose_dtype(device, dtype) is None and not placement.spread


def choose_precision(
    device: torch.device,
    dtype: str | torch.dtype | None = None,
    *,
    cache_file: Path | None = None,
    measure: Measure | None = None,
    placement: Placement = Placement(),
) -> PrecisionChoice:
    """The target's precision for `device` and the `dtype` asked for (see the module's doc).
    For `auto` on a CPU: the decision in `cache_file` if there is one, else `measure` is run
    and its decision written there; for a spread target, bf16 unmeasured."""
    chosen = choose_dtype(device, dtype)
    if placement.spread and chosen == INT8:
        raise DeviceError("an int8 target is quantized whole in memory: it cannot be spread by a device map")
    if chosen is None and placement.spread:
        return PrecisionChoice(
            dtype_name(torch.bfloat16),
            "a target spread by a device map is not timed per precision (each would load it)",
        )
    if chosen is not None:
        if str(asked_dtype(dtype)).lower() != "auto":
            return PrecisionChoice(dtype_name(chosen), "chosen")
        if device.type == "cuda":
            return PrecisionChoice(dtype_name(chosen), "the default on CUDA")
        return PrecisionChoice(dtype_name(chosen), "this CPU has no native bf16 arithmetic")
    if cache_file is not None:
        cached = read(cache_file)
        if cached is not None:
            return cached
    if measure is None:
        raise ValueError("choosing the precision by measurement needs a measure function")
    decision = decide(measure((torch.float32, torch.bfloat16)))
    if cache_file is not None:
        write(cache_file, decision)
    return decision
