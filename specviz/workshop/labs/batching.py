"""What batching does to speculative decoding, measured on the loaded pair.

A server decodes many sequences at once. One round then drafts k tokens for each of b
sequences and verifies b x (k + 1) tokens in one target pass; plain decoding would pass b
tokens. Whether that pays depends on how the pass cost grows with the tokens it carries, so
this times it: the target's pass over n new tokens for each of b sequences (after a cached
context, as a verify pass runs), and the draft's one-token pass for b sequences, each the
median of a few repeats after a warm-up. From those and an acceptance rate alpha:

    speedup(b, k) = tokens_per_round(alpha, k) * V_b(1) / (k * D_b + V_b(k + 1))

A pass is cheap to widen while it is memory-bound: every weight is read once per pass
whatever the token count, and the arithmetic per weight grows with it. `machine()` times a
large copy (memory bandwidth) and a large matrix product (compute) to say where this machine
turns from one to the other.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from specviz import limits, theory
from specviz.cost_model import CostModel
from specviz.errors import UserError
from specviz.workshop.cli import parse_list
from specviz.workshop.generate_cli import add_pair
from specviz.settings import FIXED_K, MAX_K
from specviz.lm.runtime import missing
from specviz.models import DEFAULT_PAIR
from specviz.lm.timing import best_s
from specviz.lm.torch_runtime.forward_timing import measure_pass_ms
from specviz.models.progress import Progress
from specviz.choices import BATCHED, FIXED, INT8, TORCH

BATCH_SIZES = (1, 2, 4, 8)
PASS_SIZES = (1, 2, 3, 5, 9, MAX_K + 1)  # new tokens per sequence: up to a verify pass at k = 16
CONTEXT = 160  # cached tokens per sequence before the timed pass (as the cost model measures)
REPEATS = 3
COPY_BYTES = 128 << 20  # well beyond any CPU cache: the copy runs at memory speed
MATMUL_N = 2048
DEFAULT_ALPHA_PROMPT = "Write a function that reverses a string"


@dataclass
class BatchCosts:
    """Median ms of one pass, by batch size b and new tokens per sequence n."""

    batch_sizes: list[int]
    pass_sizes: list[int]
    target_ms: list[list[float]]  # [b index][n index]
    draft_ms: list[float]  # [b index]: the draft's pass over one token per sequence (0: no draft model)
    context: int = CONTEXT
    repeats: int = REPEATS

    def verify(self, bi: int) -> CostModel:
        """V_b(n) and D for the b at index bi (V interpolated between measured n)."""
        return CostModel(dict(zip(self.pass_sizes, self.target_ms[bi])), self.draft_ms[bi])


@dataclass
class BatchPrediction:
    batch: int
    k: int  # the run's k
    speedup: float  # at the run's k
    best_k: int  # within the measured pass sizes; 0 = do not draft
    best_speedup: float
    verify_ratio: float  # V_b(k + 1) / V_b(1): what verifying k + 1 tokens costs over one


@dataclass
class MachineFigures:
    device: str
    bandwidth_gb_s: float  # a large copy: bytes read + bytes written per second
    matmul_gflop_s: float  # a large square product in the pair's dtype
    dtype: str
    weight_bytes: int = 0  # the target's parameters
    weight_params: int = 0

    @property
    def balance(self) -> float:
        """Flops the machine does in the time it reads one byte."""
        return self.matmul_gflop_s / self.bandwidth_gb_s if self.bandwidth_gb_s else 0.0


@dataclass
class BatchingResult:
    costs: BatchCosts
    alpha: float
    k: int
    predictions: list[BatchPrediction]
    machine: MachineFigures | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def stops_paying_at(self) -> int | None:
        """The smallest batch size at which drafting the run's k is slower than plain decoding."""
        return next((p.batch for p in self.predictions if p.speedup < 1), None)

    @property
    def best_stops_paying_at(self) -> int | None:
        """The smallest batch size at which no draft length beats plain decoding."""
        return next((p.batch for p in self.predictions if p.best_k == 0), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stops_paying_at"] = self.stops_paying_at
        d["best_stops_paying_at"] = self.best_stops_paying_at
        d["explanation"] = explanation(self)
        return d


# --- measuring --------------------------------------------------------------------------------


def pass_plan(
    batch_sizes: Sequence[int] = BATCH_SIZES,
    pass_sizes: Sequence[int] = PASS_SIZES,
    *,
    repeats: int = REPEATS,
    context: int = CONTEXT,
    with_draft: bool = True,
) -> tuple[list[int], int]:
    """What `measure_batch_costs` runs: the new tokens of each of its passes (warm-up sweeps
    included, every sequence of the batch counted) and the tokens its context prefills read."""
    from specviz.lm.timing import WARMUP_SWEEPS

    sweeps = WARMUP_SWEEPS[TORCH] + repeats
    passes: list[int] = []
    for b in batch_sizes:
        passes += [b * n for n in pass_sizes] * sweeps
        passes += [b] * sweeps if with_draft else []
    prefill = sum(batch_sizes) * context * (1 + with_draft)
    return passes, prefill


def measure_batch_costs(
    pair,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    pass_sizes: Sequence[int] = PASS_SIZES,
    *,
    repeats: int = REPEATS,
    context: int = CONTEXT,
    should_stop: Callable[[], bool] | None = None,
    on_progress: Progress | None = None,
    seed: int = 0,
) -> BatchCosts:
    """Time the target over b x n new tokens and the draft over b x 1, for each b, on a warm
    cache of `context` tokens per sequence. Raises UserError("stopped") when should_stop."""
    why = missing(pair.runtime, BATCHED)
    if why:
        raise UserError(f"the batching lab: {why} (pick the torch runtime)")
    _check_sizes(batch_sizes, pass_sizes, repeats)
    target_ms, draft_ms = [], []
    steps, done = len(batch_sizes) * (1 + (pair.draft is not None)), 0
    for b in batch_sizes:
        if should_stop is not None and should_stop():
            raise UserError("the batching measurement was stopped")
        if on_progress is not None:
            on_progress(done / steps, f"target: {b} sequence{'s' * (b > 1)}")
        times = measure_pass_ms(
            pair.target,
            list(pass_sizes),
            vocab_size=pair.vocab_size,
            context=context,
            repeats=repeats,
            seed=seed,
            batch=b,
            should_stop=should_stop,
        )
        target_ms.append([times[n] for n in pass_sizes])
        done += 1
        if pair.draft is not None:
            if on_progress is not None:
                on_progress(done / steps, f"draft: {b} sequence{'s' * (b > 1)}")
            draft_ms.append(
                measure_pass_ms(
                    pair.draft,
                    [1],
                    vocab_size=pair.vocab_size,
                    context=context,
                    repeats=repeats,
                    seed=seed,
                    batch=b,
                    should_stop=should_stop,
                )[1]
            )
            done += 1
        else:
            draft_ms.append(0.0)
    if on_progress is not None:
        on_progress(1.0, "measured")
    return BatchCosts(list(batch_sizes), list(pass_sizes), target_ms, draft_ms, context, repeats)


def machine(
    device: str = "cpu",
    dtype: str = "float32",
    *,
    copy_bytes: int = COPY_BYTES,
    matmul_n: int = MATMUL_N,
    repeats: int = REPEATS,
    target=None,
) -> MachineFigures:
    """Memory bandwidth from a timed copy of `copy_bytes` (read once, written once) and compute
    from a timed matmul_n x matmul_n product (2 n^3 flops), best of `repeats` after a warm-up."""
    import torch

    dev = torch.device(device)
    # an int8 target multiplies with activations in float32
    dt = torch.float32 if dtype in (INT8, "qint8", "torch.qint8") else getattr(torch, dtype.removeprefix("torch."))
    src = torch.ones(copy_bytes // 4, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    copy_s = best_s(lambda: dst.copy_(src), dev, repeats)
    a = torch.randn(matmul_n, matmul_n, device=dev).to(dt)
    bm = torch.randn(matmul_n, matmul_n, device=dev).to(dt)
    mm_s = best_s(lambda: a @ bm, dev, repeats)
    fig = MachineFigures(
        str(dev), 2 * copy_bytes / copy_s / 1e9, 2 * matmul_n**3 / mm_s / 1e9, str(dt).removeprefix("torch.")
    )
    if target is not None:
        fig.weight_params = sum(p.numel() for p in target.parameters())
        fig.weight_bytes = sum(p.numel() * p.element_size() for p in target.parameters())
    return fig


def _check_sizes(batch_sizes: Sequence[int], pass_sizes: Sequence[int], repeats: int = REPEATS) -> None:
    limits.BATCH_SIZES.check(len(batch_sizes))
    limits.REPEATS.check(repeats)
    if not batch_sizes or any(not isinstance(b, int) or b < 1 for b in batch_sizes):
        raise UserError(f"batch sizes must be whole numbers, 1 or more (got {list(batch_sizes)})")
    limits.BATCH_SIZE.check(max(batch_sizes))
    if (
        not pass_sizes
        or 1 not in pass_sizes
        or any(not isinstance(n, int) or not 1 <= n <= MAX_K + 1 for n in pass_sizes)
    ):
        raise UserError(f"pass sizes must include 1 and lie from 1 to {MAX_K + 1} (got {list(pass_sizes)})")
    if sorted(set(batch_sizes)) != list(batch_sizes) or sorted(set(pass_sizes)) != list(pass_sizes):
        raise UserError("batch and pass sizes must rise, each once")


# --- predicting ------------------------------------------------------------------------------


def predict(costs: BatchCosts, alpha: float, k: int) -> list[BatchPrediction]:
    """Speedup over plain decoding by batch size, at the run's k and at the best k the
    measured pass sizes allow (k + 1 <= the largest n measured)."""
    k_max = max(costs.pass_sizes) - 1
    if not 1 <= k <= k_max:
        raise UserError(f"k must be from 1 to {k_max}, the largest pass measured less one (got {k})")
    out = []
    for bi, b in enumerate(costs.batch_sizes):
        v = costs.verify(bi)
        at_k = float(theory.speedup_with_cost(alpha, k, v))
        best_k, best = theory.best_k_with_cost(alpha, v, k_max=k_max)
        out.append(BatchPrediction(b, k, at_k, int(best_k), float(best), v.verify_ms(k + 1) / v.target))
    return out


def result(costs: BatchCosts, alpha: float, k: int, machine_figures: MachineFigures | None = None) -> BatchingResult:
    return BatchingResult(costs, float(alpha), int(k), predict(costs, alpha, k), machine_figures)


def explanation(r: BatchingResult) -> list[str]:
    """Sentences on why a verify pass is nearly free on a GPU at batch 1, and what it costs here."""
    words = []
    b1 = r.predictions[0]
    words.append(
        f"Here a pass verifying {r.k + 1} tokens costs {b1.verify_ratio:.2f}\u00d7 a one-token pass at batch "
        f"{r.costs.batch_sizes[0]}; at batch {r.predictions[-1].batch} it costs {r.predictions[-1].verify_ratio:.2f}\u00d7."
    )
    m = r.machine
    if m is not None and m.bandwidth_gb_s > 0:
        words.append(
            f"This machine copies memory at {m.bandwidth_gb_s:.1f} GB/s and multiplies {m.dtype} matrices at "
            f"{m.matmul_gflop_s:.0f} GFLOP/s: {m.balance:.1f} flops in the time one byte arrives."
        )
        if m.weight_bytes:
            read_ms = m.weight_bytes / (m.bandwidth_gb_s * 1e9) * 1000
            token_ms = 2 * m.weight_params / (m.matmul_gflop_s * 1e9) * 1000
            words.append(
                f"A pass reads the target's {_size(m.weight_bytes)} of weights once ({read_ms:.3g} ms at that "
                f"bandwidth) and does 2 flops per weight per token ({token_ms:.3g} ms per token at that speed): "
                f"about {read_ms / token_ms:.1f} tokens fit in the time of one weight read."
                if token_ms > 0
                else ""
            )
    words.append(
        "On a data-centre GPU at batch 1 the ratio is in the hundreds (an H100 SXM is specified at 3.35 TB/s and "
        "989 dense BF16 TFLOP/s, about 300 flops per byte, and a bf16 weight is 2 bytes): a decoding step waits on "
        "memory, so a verify pass over k + 1 tokens takes about as long as over one and the drafts ride along nearly "
        "free. The wider the batch, the more tokens share each weight read, until the pass is bound by compute; then "
        "verifying k + 1 tokens per sequence costs nearly k + 1 times as much, and rejected drafts are pure waste."
    )
    if r.stops_paying_at is not None:
        words.append(f"With \u03b1 = {r.alpha:.2f} and k = {r.k}, drafting stops paying at batch {r.stops_paying_at}.")
    else:
        words.append(
            f"With \u03b1 = {r.alpha:.2f} and k = {r.k}, drafting still pays at every batch size measured "
            f"(up to {r.predictions[-1].batch})."
        )
    return [w for w in words if w]


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def table(r: BatchingResult) -> str:
    c = r.costs
    head = "batch  " + "  ".join(f"V(n={n})".rjust(9) for n in c.pass_sizes) + "  draft D"
    lines = [f"ms per pass (median of {c.repeats}, {c.context} cached tokens per sequence)", head]
    for bi, b in enumerate(c.batch_sizes):
        lines.append(f"{b:>5}  " + "  ".join(f"{ms:>9.1f}" for ms in c.target_ms[bi]) + f"  {c.draft_ms[bi]:>7.1f}")
    lines += [
        "",
        f"predicted speedup over plain decoding at alpha = {r.alpha:.2f}",
        f"batch  k={r.k:<3} speedup  V(k+1)/V(1)  best k  best speedup",
    ]
    for p in r.predictions:
        mark = "  <- stops paying" if p.batch == r.stops_paying_at else ""
        lines.append(
            f"{p.batch:>5}  {p.speedup:>13.2f}\u00d7  {p.verify_ratio:>11.2f}  {p.best_k:>6}  {p.best_speedup:>11.2f}\u00d7{mark}"
        )
    lines += [""] + explanation(r)
    return "\n".join(lines)


# --- `python -m specviz batching` ------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pair(parser)
    parser.add_argument(
        "--alpha", type=float, help="acceptance rate to predict with (default: measured by a short greedy run)"
    )
    parser.add_argument("--k", type=int, default=FIXED_K, help="draft length to predict for (default: %(default)s)")
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)), help="(default: %(default)s)")
    parser.add_argument(
        "--pass-sizes", default=",".join(map(str, PASS_SIZES)), help="new tokens per sequence (default: %(default)s)"
    )
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, help="timed passes per size; the median counts (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from specviz.engine.load import load

    batch_sizes = parse_list("--batch-sizes", args.batch_sizes, int)
    pass_sizes = parse_list("--pass-sizes", args.pass_sizes, int)
    if args.repeats < 1:
        raise UserError("--repeats must be 1 or more")
    _check_sizes(batch_sizes, pass_sizes, args.repeats)
    if args.alpha is not None and not 0 <= args.alpha <= 1:
        raise UserError(f"--alpha must be between 0 and 1 (got {args.alpha})")
    if not 1 <= args.k <= max(pass_sizes) - 1:
        raise UserError(f"--k must be from 1 to {max(pass_sizes) - 1}, the largest pass size less one (got {args.k})")
    pair = load(args.pair or DEFAULT_PAIR, with_draft=True, runtime=TORCH)  # batched passes are torch's (BATCHED)
    return report(
        pair,
        alpha=args.alpha,
        k=args.k,
        batch_sizes=batch_sizes,
        pass_sizes=pass_sizes,
        repeats=args.repeats,
        as_json=args.json,
        out=sys.stdout,
    )


def measured_alpha(pair, k: int, max_new_tokens: int = 32) -> float:
    """The acceptance of a short greedy run at draft length k (fixed k)."""
    from dataclasses import fields, replace

    from specviz import engine
    from specviz.settings import GenerationSettings

    settings = GenerationSettings(k=k, max_new_tokens=max_new_tokens)
    if "policy" in {f.name for f in fields(GenerationSettings)}:
        settings = replace(settings, policy=FIXED)
    return engine.run(pair, DEFAULT_ALPHA_PROMPT, settings).summary.acceptance_rate


def report(
    pair,
    *,
    alpha: float | None,
    k: int,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    pass_sizes: Sequence[int] = PASS_SIZES,
    repeats: int = REPEATS,
    as_json: bool,
    out: TextIO,
    machine_kw: dict | None = None,
) -> int:
    """Measure, predict and print (the testable part of `run`)."""
    if not 1 <= k <= max(pass_sizes) - 1:
        raise UserError(f"--k must be from 1 to {max(pass_sizes) - 1}, the largest pass size less one (got {k})")
    progress = None if as_json else (lambda f, m: print(f"  {f:4.0%} {m}", file=sys.stderr))
    costs = measure_batch_costs(pair, batch_sizes, pass_sizes, repeats=repeats, on_progress=progress)
    if alpha is None:
        alpha = measured_alpha(pair, k)
    figures = machine(str(pair.device), pair.precision, target=pair.target, **(machine_kw or {}))
    r = result(costs, alpha, k, figures)
    out.write((json.dumps(r.to_dict()) if as_json else table(r)) + "\n")
    return 0
