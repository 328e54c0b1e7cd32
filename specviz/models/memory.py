"""The memory budget for loaded models: refuse a load that would not fit, and say by how much.

The budget is `SPECVIZ_MEMORY_BUDGET_GB` when set, else 90% of the device's memory (system
RAM for the CPU). A model's size is its parameter count times the bytes of the dtype it is
loaded in, read from the safetensors headers before anything is loaded.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from specviz.models.errors import MemoryBudgetError

if TYPE_CHECKING:
    import torch

GB = 1e9
DEFAULT_FRACTION = 0.9


def gb(n: float) -> str:
    return f"{n / GB:.1f} GB"


def params_in_folder(folder: Path) -> int:
    """Parameter count of the safetensors files in `folder`, from their headers alone."""
    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > path.stat().st_size - 8:  # read(n) would first allocate n bytes
                raise ValueError(f"{path.name}: the header claims {n:,} bytes, more than the file holds")
            header = json.loads(f.read(n))
        for name, meta in header.items():
            if name != "__metadata__":
                count = 1
                for d in meta["shape"]:
                    count *= d
                total += count
    return total


def model_bytes(params: int, dtype: torch.dtype) -> int:
    return params * dtype.itemsize


def budget(device: torch.device) -> tuple[int, str]:
    """(bytes, where the figure comes from)."""
    env = os.environ.get("SPECVIZ_MEMORY_BUDGET_GB")
    if env:
        try:
            return int(float(env) * GB), "SPECVIZ_MEMORY_BUDGET_GB"
        except ValueError:
            raise MemoryBudgetError(f"SPECVIZ_MEMORY_BUDGET_GB must be a number of gigabytes (got {env!r})") from None
    if device.type == "cuda":
        import torch

        total = torch.cuda.get_device_properties(device).total_memory
        return int(total * DEFAULT_FRACTION), f"{DEFAULT_FRACTION:.0%} of the GPU's {gb(total)}"
    import psutil

    total = psutil.virtual_memory().total
    return int(total * DEFAULT_FRACTION), f"{DEFAULT_FRACTION:.0%} of the {gb(total)} of RAM"


def check_fits(what: str, need: int, held: int, device: torch.device) -> None:
    """Raise MemoryBudgetError if `need` more bytes on top of `held` exceed the budget."""
    limit, source = budget(device)
    if held + need > limit:
        raise MemoryBudgetError(
            f"{what} needs {gb(need)} on {device}, and loaded models already hold {gb(held)}: "
            f"{gb(held + need)} is over the memory budget of {gb(limit)} ({source}). "
            "Use a smaller pair, a smaller dtype (SPECVIZ_DTYPE=bfloat16), or raise the budget."
        )
