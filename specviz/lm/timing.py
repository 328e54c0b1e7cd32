"""Timing forward passes: what one pass over n new tokens costs on a warm KV cache.

Every timing in specviz is taken here: the pair's pass costs V(n) and D behind the cost
model (`costs.measure`, which the runtime choice reads), the target's precision
(`torch_runtime.precision`) and the batching lab's passes over several sequences. A pass is
timed as the engine runs it, through the runtime's own loop (`runtime.open_lm`), except where
what is asked is transformers' forward itself (`torch_runtime.forward_timing.measure_pass_ms`:
the batching lab, and the bench's comparison with `generate`), timed by `median_ms` here.
"""

from __future__ import annotations

import platform
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from specviz.choices import LLAMACPP, TORCH
from specviz.errors import UserError
from specviz.lm.runtime import open_lm

# Untimed sweeps over every size before the timed ones, per runtime. On torch the first passes
# after a load are slower (weights paged in, kernels chosen per shape); one sweep was not always
# enough. llama.cpp chooses no kernels per shape, and the context fill before the sweeps has
# already read every weight: its first sweep is as fast as later ones (docs/BENCHMARKS.md).
WARMUP_SWEEPS = {TORCH: 2, LLAMACPP: 0}  # another runtime: torch's
# Context the costs are measured at: a typical prompt plus part of an answer.
MEASURE_CONTEXT = 160
# Timed sweeps after the warm-up ones; each size's median is kept. One sweep is not enough: a
# single slow pass (another process taking a core) is cached for good and, since a larger
# pass never counts as cheaper, raises every size above it.
REPEATS = 3
# A process that starts other CPU work beside a load (the page: importing gradio and building
# itself while the pair loads) holds timings until that work is done (`hold`, `release`). On
# two cores a busy Python thread makes llama.cpp's threads wait at every barrier, so passes
# timed then came out several times slow and priced the whole session (docs/BENCHMARKS.md).
# Never held longer than this.
QUIET_WAIT_S = 120.0
_quiet = threading.Event()
_quiet.set()


def hold() -> None:
    """Timings wait (up to QUIET_WAIT_S) until `release`."""
    _quiet.clear()


def release() -> None:
    _quiet.set()


def cpu_name() -> str:
    """The CPU's model name: part of every cached timing's key."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The CPU's feature flags ("avx512_bf16", "amx_tile", ...); empty where none are told."""
    return set((_cpuinfo("flags") or "").split())


def _cpuinfo(field: str) -> str | None:
    """The value of the first `field` line of /proc/cpuinfo, None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def median_ms(
    run: Callable[[int], None],
    sizes: list[int],
    *,
    device: torch.device,
    repeats: int = REPEATS,
    should_stop: Callable[[], bool] | None = None,
    runtime: str = TORCH,
) -> dict[int, float]:
    """Median ms of `run(n)` (one pass over n new tokens, undone afterwards) for each n in
    `sizes`, interleaved within each repeat, after the runtime's untimed warm-up sweeps."""
    _quiet.wait(QUIET_WAIT_S)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    warmup = WARMUP_SWEEPS.get(runtime, WARMUP_SWEEPS[TORCH])
    for rep in range(warmup + repeats):
        for n in sizes:
            if should_stop is not None and should_stop():
                raise UserError("the measurement was stopped")
            ms = 1000 * seconds(lambda: run(n), device)
            if rep >= warmup:
                times[n].append(ms)
    return {n: statistics.median(v) for n, v in times.items()}


def best_s(fn: Callable[[], object], device, repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls of `fn` after one untimed call: a machine
    figure (a copy's bandwidth, a product's compute), where the best is what the hardware does."""
    fn()
    return min((seconds(fn, device) for _ in range(repeats)), default=float("inf"))


def seconds(fn: Callable[[], object], device) -> float:
    """Seconds one call of `fn` takes on `device`, the GPU work it queued included."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def sync(where) -> None:
    """Wait for the GPU work queued on `where` (a device, its name, or a tensor on it), so a
    clock read after it times that work; nothing to wait for on a CPU."""
    device = where.device if isinstance(where, torch.Tensor) else torch.device(where)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def drafted_token_ms(draft, device, vocab_size: int, *, repeats: int = REPEATS) -> float:
    """One drafted token as a chain drafter runs it (`runtime.open_lm`): a one-token feed
    after MEASURE_CONTEXT cached tokens, logits of that token only."""
    return chain_pass_ms(draft, torch.device(device), vocab_size, [1], keep=1, repeats=repeats)[1]


def target_pass_ms(
    target, device, vocab_size: int, sizes: list[int], *, repeats: int = REPEATS, context: int = MEASURE_CONTEXT
) -> dict[int, float]:
    """One target pass over n new tokens as the engine runs it (`runtime.open_lm`, as
    `engine.decoder` opens it for every mode), after `context` cached tokens, with logits
    for every new position (as a verify pass needs): a pair's V(n), and each precision's
    when the target's is chosen (`torch_runtime.precision`)."""
    return chain_pass_ms(target, torch.device(device), vocab_size, sizes, keep=0, repeats=repeats, context=context)


@torch.inference_mode()
def chain_pass_ms(
    model,
    device: torch.device,
    vocab_size: int,
    sizes: list[int],
    *,
    keep: int,
    repeats: int,
    context: int = MEASURE_CONTEXT,
) -> dict[int, float]:
    """Median ms of a feed of n random tokens through `open_lm(model)` after `context`
    cached ones (`keep` as `feed` takes it), cropped back after each, for each n in `sizes`."""
    lm = open_lm(model, device)
    gen = torch.Generator().manual_seed(0)
    lm.feed(torch.randint(0, vocab_size, (context,), generator=gen))

    def one_pass(n: int) -> None:
        lm.feed(torch.randint(0, vocab_size, (n,), generator=gen), keep=keep)
        lm.crop(context)

    return median_ms(one_pass, sizes, device=device, repeats=repeats, runtime=lm.runtime)
