"""The memory budget for loaded models: refuse a load that would not fit, and say by how much.

The budget is `SPECVIZ_MEMORY_BUDGET_GB` when set, else 90% of the device's memory (system
RAM for the CPU). A model's size is its parameter count times the bytes of the dtype it is
loaded in, read from the safetensors headers before anything is loaded.

RAM is the container's where a cgroup limits it (a Hugging Face Space, docker
--memory): /proc/meminfo there describes the host, which may hold many times more, and
a process that trusts it is killed, not refused.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from specviz.models.errors import MemoryBudgetError

if TYPE_CHECKING:
    import torch

GB = 1e9
DEFAULT_FRACTION = 0.9
CGROUP = Path("/sys/fs/cgroup")


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
        total += sum(math.prod(meta["shape"]) for name, meta in header.items() if name != "__metadata__")
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
    total = ram_total()
    return int(total * DEFAULT_FRACTION), f"{DEFAULT_FRACTION:.0%} of the {gb(total)} of RAM"


def ram_total(cgroup: Path | None = None) -> int:
    """Bytes of RAM this process may use: the machine's, or its cgroup's limit if lower."""
    import psutil

    cgroup = cgroup or CGROUP
    limit = _cgroup_limit(cgroup)
    total = psutil.virtual_memory().total
    return min(total, limit) if limit else total


def ram_available(cgroup: Path | None = None) -> int:
    """Bytes of RAM that can still be taken without swapping or a kill: the machine's
    available memory, or what its cgroup's limit leaves if less (page cache the kernel can
    drop, the inactive file pages, counts as free, as in the machine's own figure)."""
    import psutil

    cgroup = cgroup or CGROUP
    available = psutil.virtual_memory().available
    limit = _cgroup_limit(cgroup)
    if not limit:
        return available
    used = _read_int(cgroup / "memory.current") or _read_int(cgroup / "memory" / "memory.usage_in_bytes")
    if used is None:
        return min(available, limit)
    stat = _read_stat(cgroup / "memory.stat") or _read_stat(cgroup / "memory" / "memory.stat")
    used -= stat.get("inactive_file", stat.get("total_inactive_file", 0))
    return max(0, min(available, limit - used))


def _cgroup_limit(cgroup: Path) -> int | None:
    """The memory limit of cgroup v2 (memory.max) or v1 (memory/memory.limit_in_bytes), None
    where there is none (v1 reports "no limit" as a huge number)."""
    limit = _read_int(cgroup / "memory.max") or _read_int(cgroup / "memory" / "memory.limit_in_bytes")
    return limit if limit and limit < 1 << 60 else None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None  # absent, or "max"


def _read_stat(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
    except OSError:
        return {}


def check_fits(what: str, need: int, held: int, device: torch.device) -> None:
    """Raise MemoryBudgetError if `need` more bytes on top of `held` exceed the budget."""
    limit, source = budget(device)
    if held + need > limit:
        raise MemoryBudgetError(
            f"{what} needs {gb(need)} on {device}, and loaded models already hold {gb(held)}: "
            f"{gb(held + need)} is over the memory budget of {gb(limit)} ({source}). "
            "Use a smaller pair, a smaller dtype (SPECVIZ_DTYPE=bfloat16), or raise the budget."
        )
