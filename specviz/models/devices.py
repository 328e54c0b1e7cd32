"""Where the models run and in what precision.

The device: CUDA when present, else the CPU. The target's precision (`choose_precision`,
the one place it is decided; the loader calls it for every entry point):

- `auto` (the default): bf16 on CUDA. On a CPU, the faster of fp32 and bf16 for this target
  on this machine, measured once and cached (`precision.py`): a one-token pass V(1) and an
  8-token pass V(8) in each, and the one with the lower V(1) + V(8) wins, the cost of one
  plain-decoding step plus one verify pass of a round drafting 7 tokens. A CPU without
  native bf16 arithmetic computes bf16 slower than fp32, so there it is fp32 unmeasured.
- `float32`, `bfloat16` (and `float16`): as asked.
- `int8`: an opt-in on a CPU; the target quantized with the draft's quantizer
  (`int8_draft.py`: dynamic int8, activations in fp32).

`SPECVIZ_DEVICE` (cpu, cuda, cuda:1, ...) and `SPECVIZ_DTYPE` (auto, float32/fp32,
bfloat16/bf16, float16/fp16, int8) stand in for an argument not given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from specviz.models.errors import DeviceError

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
# What the command lines and the page offer (float16 is still accepted by name).
CHOICES = ("auto", "float32", "bfloat16", "int8")
# The dtype of a target quantized to int8 (its weights; activations stay float32).
INT8 = torch.qint8

# (candidate dtypes) -> {dtype name: {pass size: ms}}; run only when nothing is cached.
Measure = Callable[[tuple[torch.dtype, ...]], dict[str, dict[int, float]]]


@dataclass
class Precision:
    """The target's precision and why. `dtype` is what the target computes in (torch.qint8
    for int8), `load_dtype` what its weights are loaded in before any quantizing."""

    dtype: torch.dtype
    reason: str
    costs: dict[str, dict[int, float]] = field(default_factory=dict)  # ms per pass size, per dtype measured

    @property
    def name(self) -> str:
        return "int8" if self.dtype == INT8 else dtype_name(self.dtype)

    @property
    def load_dtype(self) -> torch.dtype:
        return torch.float32 if self.dtype == INT8 else self.dtype


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
            raise DeviceError(f"device {str(wanted)!r} asked for, but there are {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise DeviceError(f"device {str(wanted)!r} is not supported: use cpu, cuda or cuda:N")
    return dev


def choose_dtype(device: torch.device, dtype: str | torch.dtype | None = None) -> torch.dtype | None:
    """The dtype asked for (argument, else SPECVIZ_DTYPE), checked; None for `auto` on a CPU
    (decided by measuring, see `choose_precision`); torch.qint8 for int8."""
    wanted = dtype if dtype is not None else os.environ.get("SPECVIZ_DTYPE") or None
    if wanted is None or str(wanted).lower() == "auto":
        if device.type == "cuda":
            return torch.bfloat16
        return torch.float32 if not native_bf16() else None
    if isinstance(wanted, torch.dtype):
        if wanted in DTYPES.values() or wanted == INT8:
            return _check_int8(device, wanted)
        raise DeviceError(f"dtype {wanted} is not supported: use {', '.join(CHOICES)}")
    name = str(wanted).lower()
    if name in ("int8", "qint8"):
        return _check_int8(device, INT8)
    try:
        return DTYPES[name]
    except KeyError:
        raise DeviceError(f"unknown dtype {wanted!r}: use {', '.join(CHOICES)} (or float16)") from None


def choose_precision(
    device: torch.device,
    dtype: str | torch.dtype | None = None,
    *,
    cache_file: Path | None = None,
    measure: Measure | None = None,
) -> Precision:
    """The target's precision for `device` and the `dtype` asked for (see the module's doc).
    For `auto` on a CPU: the decision in `cache_file` if there is one, else `measure` is run
    and its decision written there."""
    from specviz.models import precision as measured

    chosen = choose_dtype(device, dtype)
    asked = dtype if dtype is not None else os.environ.get("SPECVIZ_DTYPE") or "auto"
    if chosen is not None:
        if str(asked).lower() != "auto":
            return Precision(chosen, "chosen")
        if device.type == "cuda":
            return Precision(chosen, "the default on CUDA")
        return Precision(chosen, "this CPU has no native bf16 arithmetic")
    if cache_file is not None:
        cached = measured.read(cache_file)
        if cached is not None:
            return cached
    if measure is None:
        raise ValueError("choosing the precision by measurement needs a measure function")
    decision = measured.decide(measure((torch.float32, torch.bfloat16)))
    if cache_file is not None:
        measured.write(cache_file, decision)
    return decision


def native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 or AMX); without it bf16 is
    emulated and slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def _check_int8(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    if dtype == INT8 and device.type != "cpu":
        raise DeviceError("int8 targets run on a CPU only (dynamic int8 has CPU kernels): use bfloat16 on CUDA")
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    return "int8" if dtype == INT8 else str(dtype).removeprefix("torch.")
