"""Timing forward passes: what one pass over n new tokens costs on a warm KV cache.

The one measurement behind the cost model (`drafters.cost_model`), the choice of precision
(`models.loading.precision`) and the batching lab.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from specviz.choices import LLAMACPP, TORCH
from specviz.errors import UserError
from specviz.models.speedups.keep import logits_to_keep

# Untimed sweeps over every size before the timed ones, per runtime. On torch the first passes
# after a load are slower (weights paged in, kernels chosen per shape); one sweep was not always
# enough. llama.cpp chooses no kernels per shape, and the context fill before the sweeps has
# already read every weight: its first sweep is as fast as later ones (docs/BENCHMARKS.md).
WARMUP_SWEEPS = {TORCH: 2, LLAMACPP: 0}
# Context the costs are measured at: a typical prompt plus part of an answer.
MEASURE_CONTEXT = 160


@torch.inference_mode()
def measure_pass_ms(model: torch.nn.Module, sizes: list[int], *, vocab_size: int, context: int = MEASURE_CONTEXT, repeats: int = 3, seed: int = 0,
                    batch: int = 1, should_stop: Callable[[], bool] | None = None) -> dict[int, float]:
    """Median ms of one forward pass over n new tokens after `context` cached tokens, for
    each n in `sizes`, with logits for every new position (as a verify pass needs). Sizes
    are interleaved within each repeat so machine drift hits them alike; untimed sweeps
    first warm the kernels up. `batch` sequences go through each pass side by side;
    `should_stop()` true ends the measurement with a UserError."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, vocab_size, (batch, context), generator=gen).to(device)
    cache = DynamicCache(config=model.config)
    model(input_ids=ctx, cache=cache, use_cache=True, logits_to_keep=logits_to_keep(context, 1, device))

    def one_pass(n: int) -> None:
        model(input_ids=torch.randint(0, vocab_size, (batch, n), generator=gen).to(device), cache=cache, use_cache=True)
        cache.crop(-n)

    return median_ms(one_pass, sizes, device=device, repeats=repeats, should_stop=should_stop)


def median_ms(run: Callable[[int], None], sizes: list[int], *, device: torch.device, repeats: int = 3,
              should_stop: Callable[[], bool] | None = None, runtime: str = TORCH) -> dict[int, float]:
    """Median ms of `run(n)` (one pass over n new tokens, undone afterwards) for each n in
    `sizes`, interleaved within each repeat, after the runtime's untimed warm-up sweeps."""
    times: dict[int, list[float]] = {n: [] for n in sizes}
    warmup = WARMUP_SWEEPS[runtime]
    for rep in range(warmup + repeats):
        for n in sizes:
            if should_stop is not None and should_stop():
                raise UserError("the measurement was stopped")
            sync(device)
            t0 = time.perf_counter()
            run(n)
            sync(device)
            if rep >= warmup:
                times[n].append((time.perf_counter() - t0) * 1000)
    return {n: statistics.median(v) for n, v in times.items()}


def sync(where) -> None:
    """Wait for the GPU work queued on `where` (a device, its name, or a tensor on it), so a
    clock read after it times that work; nothing to wait for on a CPU."""
    device = where.device if isinstance(where, torch.Tensor) else torch.device(where)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
