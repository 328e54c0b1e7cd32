"""What a forward pass costs as a function of how many new tokens it carries.

The textbook speedup takes one target pass to cost the same T whether it verifies 1 token or
k+1. On a GPU, or a CPU computing in bf16, that nearly holds; on a CPU in fp32 it does not (a
4-token pass can cost twice a 1-token one). So the target's pass cost V(n) over n new tokens
is measured on a warm cache, with the draft's cost per token D, once per pair / device /
dtype / thread count, and cached on disk (on a small CPU a measurement takes tens of
seconds). The engine measures it when a pair is first used (`for_pair`) into the one cost
type, `cost_model.CostModel`; the cost-aware policy and every speedup the page shows read it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from specviz.choices import TORCH
from specviz.cost_model import CostModel
from specviz.models.files.cache import cache_root, digest, file_name, write_json
from specviz.lm.torch_runtime.devices import spread_over
from specviz.lm.runtime import open_lm, runtime_of
from specviz.models.alignment.vocab import head_rows
from specviz.lm.timing import MEASURE_CONTEXT, REPEATS, cpu_name, drafted_token_ms, target_pass_ms
from specviz.lm.torch_runtime.forward_timing import measure_pass_ms
from specviz.settings import MAX_K

# Pass sizes measured: the small ones a usual k needs, then sparser (interpolated between).
MEASURED_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 13, MAX_K + 1)
# A cached cost model is checked at load with this many timed one-token passes. Off by more
# than this share: measured again if the machine is faster now (the cache was taken in a slow
# moment), scaled by the check if it is slower (a busy or drifting machine slows every pass
# alike, and timing every size again would cost a small CPU minutes at every load).
CHECK_REPEATS = 3
CHECK_TOLERANCE = 0.25
# A check slower than the cache is timed again after a pause, up to this many times, and the
# fastest kept: a moment's load (a browser opening the page beside the server) passes and
# would otherwise price the whole session; a lasting one is there at every try.
CHECK_RETRIES = 3
CHECK_PAUSE_S = 1.0
# The check's passes follow this many cached tokens, not MEASURE_CONTEXT: filling a context
# of MEASURE_CONTEXT takes seconds on a small CPU, which every load would pay. `measure` times the same short pass for comparison.
CHECK_CONTEXT = 8
# A target spread over devices and disk by a device map reads its offloaded layers again at
# every pass: it is timed at fewer sizes, in one timed sweep (the rest is interpolated).
SPREAD_SIZES = (1, 4, MAX_K + 1)
SPREAD_REPEATS = 1
# A size timed dearer than `SPIKE` times n one-token passes, or than a larger pass, met a busy
# moment (no runtime here makes a pass dearer per token than one-token passes): timed again, up
# to SPIKE_RETRIES times, the cheaper timing kept. Cached as it was, one such spike would price
# every later load: the curve is never cheaper with more tokens, so it spreads to every larger size.
SPIKE = 1.25
SPIKE_RETRIES = 2


# --- measuring -------------------------------------------------------------------------------


def measure(pair, sizes=MEASURED_SIZES, *, repeats: int = REPEATS) -> CostModel:
    """Time the pair's target over each of `sizes` new tokens and its draft over one."""
    verify = target_pass_ms(pair.target, pair.device, pair.vocab_size, list(sizes), repeats=repeats)
    for _ in range(SPIKE_RETRIES):
        if not (again := spikes(verify)):
            break
        timed = target_pass_ms(pair.target, pair.device, pair.vocab_size, again, repeats=repeats)
        verify.update({n: min(verify[n], ms) for n, ms in timed.items()})
    drafter = pair.draft if pair.draft is not None else pair.target
    # A draft with another tokenizer reads ids of its own vocabulary, which may be smaller.
    draft_vocab = len(pair.draft_tokenizer) if getattr(pair, "draft_tokenizer", None) is not None else pair.vocab_size
    draft_vocab = min(draft_vocab, head_rows(drafter))
    if pair.draft is not None or pair.runtime != TORCH:  # without a draft: the target's pass, as its runtime runs it
        draft = drafted_token_ms(drafter, pair.device, draft_vocab, repeats=repeats)
    else:
        draft = measure_pass_ms(drafter, [1], vocab_size=draft_vocab, repeats=repeats)[1]
    check = target_pass_ms(pair.target, pair.device, pair.vocab_size, [1], repeats=repeats, context=CHECK_CONTEXT)[1]
    return CostModel(
        verify=verify,
        draft=draft,
        source="measured",
        meta={"repeats": repeats, "context": MEASURE_CONTEXT, "check_ms": check, "check_context": CHECK_CONTEXT},
    )


def spikes(verify: dict[int, float]) -> list[int]:
    """The sizes whose timing cannot be the pass's own (`SPIKE`): dearer than n one-token
    passes, or than a pass over more tokens."""
    sizes = sorted(verify)
    out = []
    for i, n in enumerate(sizes):
        larger = min((verify[m] for m in sizes[i + 1 :]), default=float("inf"))
        if verify[n] > SPIKE * min(n * verify.get(1, float("inf")), larger):
            out.append(n)
    return out


def load_or_measure(
    pair, *, sizes=MEASURED_SIZES, cache_dir: Path | None = None, remeasure: bool = False, repeats: int = REPEATS
) -> CostModel:
    """The pair's cost model from the cache folder, or measured now and cached.

    The cache key is everything that changes the costs: pair, device, dtype, thread count,
    CPU / GPU, torch and transformers versions, and the sizes measured. A cached model whose
    one-token pass is slower than a quick timing now is measured again and replaced; one that
    is faster than the machine now prices this load scaled by the timing, and stays cached."""
    path = _cache_path(pair, sizes, cache_dir)
    cached = None
    if not remeasure and path.is_file():
        try:
            cached = CostModel.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError, AttributeError):
            cached = None  # a damaged cache file is measured again and replaced
        if cached is not None:
            # A cache measured while something else held the CPU would price every run wrongly
            # for good: a few one-token passes now say whether it still holds.
            ratio = _check_ratio(pair, cached)
            for _ in range(CHECK_RETRIES if ratio > 1 + CHECK_TOLERANCE else 0):
                time.sleep(CHECK_PAUSE_S)
                ratio = min(ratio, _check_ratio(pair, cached))
                if ratio <= 1 + CHECK_TOLERANCE:
                    break
            if abs(ratio - 1) <= CHECK_TOLERANCE:
                cached.source = "cached"
                return cached
            if ratio > 1:
                # Slower than the cache: something else holds the CPU now. This load is priced
                # as the machine is now; the cache keeps the undisturbed costs for later loads.
                return scaled(cached, ratio)
    model = measure(pair, sizes, repeats=repeats)
    model.meta["key"] = _key_fields(pair, sizes)
    if cached is not None and model.target >= cached.target:
        # The check said faster, the full timing did not: a busy moment during it must not
        # overwrite the undisturbed costs either.
        model.meta["cache_kept"] = True
        return model
    write_json(path, model.to_dict())
    return model


def _check_ratio(pair, cached: CostModel) -> float:
    """A one-token pass timed now over the same pass in the cache (the short-context one
    `measure` keeps; a cache without it is compared at MEASURE_CONTEXT)."""
    context = cached.meta.get("check_context")
    if context and cached.meta.get("check_ms"):
        return target_pass_ms(
            pair.target, pair.device, pair.vocab_size, [1], repeats=CHECK_REPEATS, context=int(context)
        )[1] / float(cached.meta["check_ms"])
    return target_pass_ms(pair.target, pair.device, pair.vocab_size, [1], repeats=CHECK_REPEATS)[1] / cached.target


def scaled(cached: CostModel, ratio: float) -> CostModel:
    """`cached` with every cost times `ratio`: the cached curve at the level timed now."""
    meta = {**cached.meta, "scaled_by": round(ratio, 3), "cache_kept": True}
    return CostModel(
        verify={n: v * ratio for n, v in cached.verify.items()},
        draft=cached.draft * ratio,
        source="cached, scaled",
        meta=meta,
    )


def _sizes(pair) -> tuple[int, ...]:
    """The pass sizes timed for `pair`: fewer for a target spread over devices and disk."""
    return SPREAD_SIZES if spread_over(pair.target) else MEASURED_SIZES


def is_cached(pair) -> bool:
    """Whether `for_pair` will find this pair's costs on disk (and only check them)."""
    return _cache_path(pair, _sizes(pair), None).is_file()


def for_pair(pair) -> CostModel:
    """The pair's cost model, measured or read once per loaded pair and kept on it."""
    model = pair.cost_model
    if model is None:
        spread = spread_over(pair.target)
        model = load_or_measure(pair, sizes=_sizes(pair), repeats=SPREAD_REPEATS if spread else REPEATS)
        if spread:
            model.meta["spread"] = spread
        pair.cost_model = model
    return model


def key(pair) -> dict:
    """What the pair's costs depend on, as loaded now (the cache key, kept in a model's meta)."""
    return _key_fields(pair, _sizes(pair))


def _key_fields(pair, sizes) -> dict:
    import transformers

    device = torch.device(pair.device)
    hw = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {
        "pair": pair.name,
        "device": str(device),
        "hardware": hw,
        "dtype": str(pair.dtype),
        "draft": pair.draft_precision,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sizes": list(sizes),
        "linear": "few-rows product, padded",  # lm/torch_runtime/small_batch.py changed what a pass costs
        "sweeps": REPEATS,  # costs from fewer timed sweeps are not trusted
        "draft loop": _loop(pair.draft, pair.device) if pair.draft is not None else "none",
        "target loop": _loop(pair.target, pair.device),
        **_runtime_fields(pair),
        **({"spread": spread_over(pair.target)} if spread_over(pair.target) else {}),
    }


def _loop(model, device) -> str:
    """The loop `model` runs in: a torch model's is found by opening it (cheap, its packing is
    cached); another runtime has one loop, and opening it would make a context to throw away."""
    runtime = runtime_of(model)
    return open_lm(model, device).loop if runtime == TORCH else runtime


def _runtime_fields(pair) -> dict:
    """On another runtime than torch, what its models say their costs depend on (llama.cpp:
    its version, the file, its threads)."""
    if pair.runtime == TORCH:
        return {}
    return {
        "runtime": pair.runtime,
        **{role: m.cost_facts() for role, m in (("target", pair.target), ("draft", pair.draft)) if m is not None},
    }


def _cache_path(pair, sizes, cache_dir: Path | None) -> Path:
    name = f"{file_name(pair.name, 40)}-{digest(_key_fields(pair, sizes))}.json"
    return (cache_dir or cache_root()) / "cost-models" / name
