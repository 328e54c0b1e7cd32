"""`load_pair(spec)`: a ModelPair ready on the runtime asked for.

What a user typed becomes a plan of model files (`models.catalogue.sources.resolve`); the
runtime's `RUNTIMES` entry names the loader that makes the pair from it: torch's
`torch_runtime/loader.py`, llama.cpp's `llamacpp_runtime/pair.py`.
"""

from __future__ import annotations

from typing import Any

from specviz.choices import RUNTIMES, TORCH
from specviz.lm.pair import ModelPair
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.models.catalogue.sources import resolve
from specviz.models.progress import Progress


def load_pair(
    spec: str | tuple = DEFAULT_PAIR,
    *,
    with_draft: bool = True,
    progress: Progress | None = None,
    runtime: str = TORCH,
    **torch_options: Any,
) -> ModelPair:
    """Load (or return the already loaded) pair named by `spec`.

    `spec`: a preset name, `"DRAFT -> TARGET"`, `(draft, target)`, or one model for a target
    without a draft (see `sources.py`). `with_draft=False` loads only the target (draft None).
    `progress(fraction, message)` is called as the load advances. `torch_options` (device,
    dtype, int8_draft, device_map, max_memory) are the torch runtime's
    (`torch_runtime.loader.load_torch_pair`); another runtime loads the files as they are.
    """
    plan = resolve(spec, with_draft=with_draft)
    return RUNTIMES[runtime].make(plan, progress=progress, **(torch_options if runtime == TORCH else {}))
