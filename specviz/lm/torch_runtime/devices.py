"""Where the models run and in what precision.

The device: CUDA when present, else the CPU. The target's precision (decided in one place,
`precision.choose_precision`, which the loader calls for every entry point):

- `auto` (the default): bf16 on CUDA; on a CPU, the faster of fp32 and bf16 for this target
  on this machine, measured once and cached (`precision.py`), or fp32 unmeasured on a CPU
  without native bf16 arithmetic, which computes bf16 slower than fp32.
- `float32`, `bfloat16` (and `float16`): as asked.
- `int8`: an opt-in on a CPU; the target quantized with the draft's quantizer
  (`int8_draft.py`: dynamic int8, activations in fp32).

`SPECVIZ_DEVICE` (cpu, cuda, cuda:1, ...) and `SPECVIZ_DTYPE` (auto, float32/fp32,
bfloat16/bf16, float16/fp16, int8) stand in for an argument not given.

A target larger than one device (`choose_placement`, the one place it is decided): with
device map `auto` (`SPECVIZ_DEVICE_MAP=auto`) the target is loaded through accelerate's
big-model inference, its layers spread over the GPUs present, then the CPU, then disk
offload, each within `max_memory` (`SPECVIZ_MAX_MEMORY`, e.g. `0=20GiB,cpu=60GiB`); the draft
stays whole on the first device. Such a target is not timed per precision (that would load
it once per precision): `auto` gives it bf16.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch

from specviz.choices import INT8 as INT8_NAME
from specviz.choices import DEVICE_MAPS, PRECISIONS
from specviz.lm.timing import cpu_flags
from specviz.models.errors import DeviceError

# Each float precision's name and its short one; both are accepted.
SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
DTYPES = {alias: getattr(torch, name) for name, short in SHORT.items() for alias in (name, short)}
# The dtype of a target quantized to int8 (its weights; activations stay float32).
INT8 = torch.qint8

# (candidate dtypes) -> {dtype name: {pass size: ms}}; run only when nothing is cached.
Measure = Callable[[tuple[torch.dtype, ...]], dict[str, dict[int, float]]]


def dtype_of(name: str) -> torch.dtype:
    """What a target of precision `name` (a `PrecisionChoice.target`) computes in: torch.qint8
    for int8."""
    return INT8 if name == INT8_NAME else DTYPES[name]


def load_dtype(dtype: torch.dtype) -> torch.dtype:
    """What a model's weights are loaded in before any quantizing: float32 for int8."""
    return torch.float32 if dtype == INT8 else dtype


@dataclass(frozen=True)
class Placement:
    """Where the target's layers go: whole on the pair's device (`device_map` None), or
    spread by accelerate (`"auto"`) within `max_memory` (accelerate's form: {0: "20GiB",
    "cpu": "60GiB"}; None: what each device has)."""

    device_map: str | None = None
    max_memory: dict | None = None

    @property
    def spread(self) -> bool:
        return self.device_map is not None

    @property
    def name(self) -> str:
        return self.device_map or "none"

    @property
    def key(self) -> tuple:
        return (self.name, tuple(sorted((str(k), str(v)) for k, v in (self.max_memory or {}).items())))


def choose_placement(device_map: str | None = None, max_memory: dict | str | None = None) -> Placement:
    """The target's placement: `device_map` (none or auto), else SPECVIZ_DEVICE_MAP; and
    `max_memory`, else SPECVIZ_MAX_MEMORY, for a spread target only."""
    wanted = (device_map if device_map is not None else os.environ.get("SPECVIZ_DEVICE_MAP") or "none").strip().lower()
    if wanted not in DEVICE_MAPS:
        raise DeviceError(f"unknown device map {wanted!r}: use {' or '.join(DEVICE_MAPS)}")
    if wanted == "none":
        return Placement()
    limits = max_memory if max_memory is not None else os.environ.get("SPECVIZ_MAX_MEMORY") or None
    return Placement("auto", parse_max_memory(limits) if isinstance(limits, str) else limits)


def parse_max_memory(text: str) -> dict:
    """ "0=20GiB,cpu=60GiB" (or cuda:0=...; a bare number is bytes) -> {0: "20GiB", "cpu": "60GiB"}."""
    from accelerate.utils import convert_file_size_to_int

    out: dict = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        where, _, size = item.partition("=")
        where, size = where.strip().lower().removeprefix("cuda:"), size.strip()
        try:
            convert_file_size_to_int(int(size) if size.isdigit() else size)
        except ValueError:
            size = ""
        if not size or not (where.isdigit() or where in ("cpu", "disk", "mps")):
            raise DeviceError(f"SPECVIZ_MAX_MEMORY: {item!r} is not DEVICE=SIZE (e.g. 0=20GiB,cpu=60GiB)")
        out[int(where) if where.isdigit() else where] = int(size) if size.isdigit() else size
    return out


def room_for(limits: dict, device: torch.device, reserve: int) -> dict:
    """accelerate's `limits` (bytes per device) less `reserve` bytes on `device` (a GPU's
    index; "cpu"): room kept there for what loads after (the draft)."""
    where = (device.index or 0) if device.type == "cuda" else device.type
    out = dict(limits)
    if reserve and where in out:
        out[where] = max(0, int(out[where]) - reserve)
    return out


def spread_over(model: torch.nn.Module) -> dict[str, int]:
    """For a model loaded with a device map: how many of its placed modules are on each
    device ("cuda:0", "cpu", "disk"); empty for a model loaded whole on one device."""
    placed = getattr(model, "hf_device_map", None) or {}
    counts: dict[str, int] = {}
    for where in placed.values():
        name = f"cuda:{where}" if isinstance(where, int) else str(where)
        counts[name] = counts.get(name, 0) + 1
    return counts if len(counts) > 1 or "disk" in counts else {}


def choose_device(device: str | torch.device | None = None) -> torch.device:
    wanted = device if device is not None else os.environ.get("SPECVIZ_DEVICE") or None
    if wanted is None or str(wanted) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(wanted)
    except (RuntimeError, TypeError):
        raise DeviceError(f"unknown device {str(wanted)!r}: use cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"device {str(wanted)!r} asked for, but CUDA is not available here: use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {str(wanted)!r} asked for, but there are {torch.cuda.device_count()} CUDA devices"
            )
    elif dev.type != "cpu":
        raise DeviceError(f"device {str(wanted)!r} is not supported: use cpu, cuda or cuda:N")
    return dev


def asked_dtype(dtype: str | torch.dtype | None = None) -> str | torch.dtype:
    """The precision asked for: `dtype`, else SPECVIZ_DTYPE, else "auto"."""
    return dtype if dtype is not None else os.environ.get("SPECVIZ_DTYPE") or "auto"


def choose_dtype(device: torch.device, dtype: str | torch.dtype | None = None) -> torch.dtype | None:
    """The dtype asked for (`asked_dtype`), checked; None for `auto` on a CPU (decided by
    measuring, see `choose_precision`); torch.qint8 for int8."""
    wanted = asked_dtype(dtype)
    if str(wanted).lower() == "auto":
        if device.type == "cuda":
            return torch.bfloat16
        return torch.float32 if not native_bf16() else None
    if isinstance(wanted, torch.dtype):
        if wanted in DTYPES.values() or wanted == INT8:
            return _check_int8(device, wanted)
        raise DeviceError(f"dtype {wanted} is not supported: use {', '.join(PRECISIONS.names)}")
    name = str(wanted).lower()
    if name in (INT8_NAME, "qint8"):
        return _check_int8(device, INT8)
    try:
        return DTYPES[name]
    except KeyError:
        raise DeviceError(f"unknown dtype {wanted!r}: use {', '.join(PRECISIONS.names)} (or float16)") from None


def native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 or AMX); without it bf16 is
    emulated and slower than fp32."""
    return not cpu_flags().isdisjoint({"avx512_bf16", "amx_bf16"})


def _check_int8(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    if dtype == INT8 and device.type != "cpu":
        raise DeviceError("int8 targets run on a CPU only (dynamic int8 has CPU kernels): use bfloat16 on CUDA")
    return dtype


def cuda_emulated() -> bool:
    """On Hugging Face ZeroGPU CUDA is emulated outside the functions that hold a GPU: models
    are moved there at load (module by module, which the emulation sees), but no pass can run or
    be timed until a run holds one."""
    try:
        from spaces.config import Config
    except ImportError:
        return False
    return bool(Config.zero_gpu)
