"""Where the models run and in what precision: CUDA in bf16 when present, else CPU in fp32.

`SPECVIZ_DEVICE` (cpu, cuda, cuda:1, ...) and `SPECVIZ_DTYPE` (float32/fp32, bfloat16/bf16,
float16/fp16) override the choice; an explicit argument overrides both.
"""

from __future__ import annotations

import os

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


def choose_dtype(device: torch.device, dtype: str | torch.dtype | None = None) -> torch.dtype:
    wanted = dtype if dtype is not None else os.environ.get("SPECVIZ_DTYPE") or None
    if wanted is None or wanted == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(wanted, torch.dtype):
        if wanted in DTYPES.values():
            return wanted
        raise DeviceError(f"dtype {wanted} is not supported: use float32, bfloat16 or float16")
    try:
        return DTYPES[str(wanted).lower()]
    except KeyError:
        raise DeviceError(f"unknown dtype {wanted!r}: use {', '.join(DTYPES)}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
