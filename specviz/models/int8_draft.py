"""The draft model in int8 on a CPU: a drafted token costs a fraction of an fp32 one.

A one-token pass on a CPU reads every weight once, so it costs about the model's size in
bytes. Dynamic int8 quantization (fbgemm: int8 weights with a scale per output channel,
activations quantized on the fly) makes the draft's pass several times cheaper, so drafting
pays at a lower acceptance rate. The int8 draft agrees with the target somewhat less often
than the fp32 one; a scale per channel keeps more of that agreement than one per tensor.
The measured costs and agreement are in docs/BENCHMARKS.md.

Exactness does not depend on it: q is the distribution of the model that actually drafted,
whatever its precision, and only the target's distribution decides the output. The target
is never quantized.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from copy import deepcopy

import torch

LAYERS_PER_STEP = 8


def wanted(device: torch.device, dtype: torch.dtype, choice: bool | None) -> bool:
    """Whether a draft loaded for `device` / `dtype` runs in int8: `choice`, else
    SPECVIZ_INT8_DRAFT (1 / 0), else on a CPU in fp32 (a GPU, or a CPU in 16-bit, keeps the
    draft as loaded). Only CPUs have the int8 kernels."""
    if choice is None and os.environ.get("SPECVIZ_INT8_DRAFT", "").strip() in ("0", "1"):
        choice = os.environ["SPECVIZ_INT8_DRAFT"].strip() == "1"
    if choice is not None:
        return choice and device.type == "cpu"
    return device.type == "cpu" and dtype == torch.float32


def quantized(model: torch.nn.Module, progress: Callable[[float, str], None] | None = None) -> torch.nn.Module:
    """An int8 copy of `model`: every linear layer, the output head included (about 17 s for
    the bundled 0.5B draft here, mostly fbgemm packing the weights). `model` is left as is:
    another pair may use it unquantized, as its target. The layers are quantized a few at a
    time so that `progress(fraction, message)` can follow them."""
    from torch.ao import quantization

    copy = deepcopy(model)
    names = [name for name, m in copy.named_modules() if isinstance(m, torch.nn.Linear)]
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of torchao; torch is pinned (2.13).
        warnings.simplefilter("ignore")
        for start in range(0, len(names), LAYERS_PER_STEP):
            chunk = names[start : start + LAYERS_PER_STEP]
            quantization.quantize_dynamic(copy, dict.fromkeys(chunk, quantization.per_channel_dynamic_qconfig), dtype=torch.qint8, inplace=True)
            if progress is not None:
                done = start + len(chunk)
                progress(done / len(names), f"{done} of {len(names)} linear layers")
    copy.eval()
    return copy
