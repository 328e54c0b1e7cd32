"""What a forward pass costs as a function of how many new tokens it carries, and the k
that this makes best.

The textbook speedup takes one target pass to cost the same T whether it verifies 1 token or
k+1. On a GPU, or a CPU in bf16 with AMX, that holds; on a CPU in fp32 it does not (DESIGN.md
section 3: 344 ms for one token, 724 ms for four). So the engine measures the target's pass
cost V(n) for n = 1 .. k_max+1 new tokens on a warm cache, and the draft's cost per token D,
once per pair / device / dtype (cached on disk: on these CPUs a measurement takes seconds),
and keeps refining both from the passes it times while generating. The draft length that
maximises expected tokens per unit time at the running acceptance estimate alpha is

    argmax_k  tokens_per_round(alpha, k) / (k*D + V(k+1))       (theory.best_k_with_cost)

where k = 0 (plain decoding, one token per one-token pass) is allowed: below the break-even
alpha, drafting loses.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from specviz import theory
from specviz.models.cache import cache_root

# Context the costs are measured at: a typical prompt plus part of an answer.
MEASURE_CONTEXT = 160
# Weight of one timed pass in the running estimate (an exponential moving average): about
# the last ten passes of a size count, so a slower machine phase shows up within a round or two.
ONLINE_WEIGHT = 0.1


@dataclass
class CostModel:
    """Measured costs in ms: `verify[n-1]` is one target pass over n new tokens (n >= 1),
    `draft` one drafted token. `source` says where the numbers came from."""

    verify: list[float]
    draft: float
    source: str = "measured"
    meta: dict = field(default_factory=dict)

    def verify_ms(self, n: int) -> float:
        """Cost of a target pass over n new tokens; past the measured sizes, the last step's
        slope carries on (never below the largest measured cost)."""
        if n < 1:
            raise ValueError(f"a pass carries at least one token (got {n})")
        if n <= len(self.verify):
            return self.verify[n - 1]
        last = self.verify[-1]
        slope = max(last - self.verify[-2], 0.0) if len(self.verify) > 1 else 0.0
        return last + slope * (n - len(self.verify))

    __call__ = verify_ms  # so theory.speedup_with_cost can take the model itself

    @property
    def target(self) -> float:
        """T: one plain-decoding step."""
        return self.verify[0]

    def best_k(self, alpha: float, k_max: int) -> int:
        """The draft length in 0..k_max with the most expected tokens per ms at `alpha`."""
        k, _ = theory.best_k_with_cost(alpha, self.verify_ms, self.draft, k_max=k_max)
        return k

    def predicted_speedup(self, alpha: float, k: float) -> float:
        """Speedup over plain decoding the measured costs predict for draft length k (the
        mean k of an adaptive run may be fractional: the cost is interpolated)."""
        lo = int(k)
        frac = k - lo
        rate = [theory.speedup_with_cost(alpha, kk, self.verify_ms, self.draft) for kk in (lo, lo + 1)]
        return (1 - frac) * rate[0] + frac * rate[1]

    def observe_verify(self, n: int, ms: float) -> None:
        """Fold one timed target pass over n tokens into the estimate."""
        while len(self.verify) < n:
            self.verify.append(self.verify_ms(len(self.verify) + 1))
        self.verify[n - 1] += ONLINE_WEIGHT * (ms - self.verify[n - 1])

    def observe_draft(self, ms_per_token: float) -> None:
        self.draft += ONLINE_WEIGHT * (ms_per_token - self.draft)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        return cls(verify=[float(x) for x in d["verify"]], draft=float(d["draft"]), source=d.get("source", "measured"), meta=d.get("meta", {}))


@torch.inference_mode()
def measure_pass_ms(model: torch.nn.Module, sizes: list[int], *, vocab_size: int, context: int = MEASURE_CONTEXT, repeats: int = 3, seed: int = 0) -> dict[int, float]:
    """Median ms of one forward pass over n new tokens after `context` cached tokens, for
    each n in `sizes`. The sizes are interleaved within each repeat so machine drift hits
    them alike; one untimed pass of each size first warms the kernels up."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, vocab_size, (1, context), generator=gen).to(device)
    cache = DynamicCache(config=model.config)
    model(input_ids=ctx, cache=cache, use_cache=True)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(repeats + 1):
        for n in sizes:
            new = torch.randint(0, vocab_size, (1, n), generator=gen).to(device)
            _sync(device)
            t0 = time.perf_counter()
            model(input_ids=new, cache=cache, use_cache=True)
            _sync(device)
            ms = (time.perf_counter() - t0) * 1000
            cache.crop(-n)
            if rep:  # the first sweep is the warm-up
                times[n].append(ms)
    return {n: statistics.median(v) for n, v in times.items()}


def measure(pair, k_max: int, *, repeats: int = 3) -> CostModel:
    """Time the pair's target over 1..k_max+1 new tokens and its draft over one."""
    verify = measure_pass_ms(pair.target, list(range(1, k_max + 2)), vocab_size=pair.vocab_size, repeats=repeats)
    drafter = pair.draft if pair.draft is not None else pair.target
    draft = measure_pass_ms(drafter, [1], vocab_size=pair.vocab_size, repeats=repeats)[1]
    return CostModel(verify=[verify[n] for n in sorted(verify)], draft=draft, source="measured", meta={"k_max": k_max, "repeats": repeats, "context": MEASURE_CONTEXT})


def load_or_measure(pair, k_max: int, *, cache_dir: Path | None = None, remeasure: bool = False, repeats: int = 3) -> CostModel:
    """The pair's cost model from the cache folder, or measured now and cached.

    The cache key is everything that changes the costs: pair, device, dtype, thread count,
    CPU, torch and transformers versions, and k_max."""
    path = _cache_path(pair, k_max, cache_dir)
    if not remeasure and path.is_file():
        try:
            model = CostModel.from_dict(json.loads(path.read_text()))
            model.source = "cached"
            return model
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache file is measured again and replaced
    model = measure(pair, k_max, repeats=repeats)
    model.meta["key"] = _key_fields(pair, k_max)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(model.to_dict(), indent=1))
    os.replace(tmp, path)
    return model


def _key_fields(pair, k_max: int) -> dict:
    import transformers

    device = torch.device(pair.device)
    hw = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {
        "pair": pair.name,
        "device": str(device),
        "hardware": hw,
        "dtype": str(pair.dtype),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "k_max": k_max,
    }


def _cache_path(pair, k_max: int, cache_dir: Path | None) -> Path:
    key = json.dumps(_key_fields(pair, k_max), sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in pair.name)[:40]
    return (cache_dir or cache_root()) / "cost-models" / f"{safe}-{digest}.json"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
