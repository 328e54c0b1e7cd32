"""What a forward pass costs as a function of how many new tokens it carries, and the draft
length that this makes best.

The textbook speedup takes one target pass to cost the same T whether it verifies 1 token or
k+1. On a GPU, or a CPU in bf16 with AMX, that holds; on a CPU in fp32 it does not (DESIGN.md
section 3: 344 ms for one token, 724 ms for four). So the engine measures the target's pass
cost V(n) over n new tokens on a warm cache, and the draft's cost per token D, once per
pair / device / dtype (cached on disk: on these CPUs a measurement takes tens of seconds).

`CostAwareLength` is the adaptive-k policy built on it. Expected tokens per ms is what it
maximises, not acceptance. A round that drafts m tokens costs C(m) = m*D + V(m+1), first as
measured, then as the policy times its own rounds:

- before a round, the draft length with the most tokens_per_round(alpha, m) / C(m) at the
  running acceptance estimate alpha sets the rate R to beat; where m = 0 (plain decoding)
  wins, the round drafts nothing, and a probe round now and then keeps alpha current;
- after each drafted token, drafting goes on only while the expected gain in tokens of the
  next j drafts (j >= 1), sum of P(all drafts so far accepted) * a^i, per ms they add,
  C(n+j) - C(n), beats R for some j. P and a use the draft's confidence in each token,
  calibrated online against the target's verdicts: a confident draft runs long, a
  hesitant one stops early.
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

import numpy as np
import torch

from specviz import theory
from specviz.drafters.length import DraftLength
from specviz.models.cache import cache_root
from specviz.settings import MAX_K

# Pass sizes measured: the small ones a usual k needs, then sparser (interpolated between).
# One timed sweep after a warm-up one: the adaptive policy corrects the costs from its own
# rounds, so the measurement only has to be a fair prior, and fast on a slow machine.
MEASURED_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 13, MAX_K + 1)
# Context the costs are measured at: a typical prompt plus part of an answer.
MEASURE_CONTEXT = 160
# Weight of one timed pass in the running estimate (an exponential moving average).
ONLINE_WEIGHT = 0.1


@dataclass
class CostModel:
    """Measured costs in ms: `verify[n]` is one target pass over n new tokens (sizes between
    measured ones are interpolated, larger ones extrapolated), `draft` one drafted token."""

    verify: dict[int, float]
    draft: float
    source: str = "measured"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.verify = _never_cheaper({int(n): float(v) for n, v in self.verify.items()})
        if not self.verify or 1 not in self.verify:
            raise ValueError("a cost model needs the cost of a one-token pass")

    def verify_ms(self, n: int) -> float:
        """Cost of a target pass over n new tokens."""
        if n < 1:
            raise ValueError(f"a pass carries at least one token (got {n})")
        sizes = list(self.verify)
        if n in self.verify:
            return self.verify[n]
        if n < sizes[-1]:
            return float(np.interp(n, sizes, list(self.verify.values())))
        last = self.verify[sizes[-1]]
        if len(sizes) == 1:
            return last
        prev = sizes[-2]
        slope = max((last - self.verify[prev]) / (sizes[-1] - prev), 0.0)
        return last + slope * (n - sizes[-1])

    __call__ = verify_ms  # theory.speedup_with_cost takes the model itself

    @property
    def target(self) -> float:
        """T: one plain-decoding step."""
        return self.verify[1]

    def best_k(self, alpha: float, k_max: int, draft_ms: float | None = None) -> tuple[int, float]:
        """The draft length in 0..k_max with the most expected tokens per ms at `alpha`,
        and its predicted speedup over plain decoding."""
        d = self.draft if draft_ms is None else draft_ms
        return theory.best_k_with_cost(alpha, self.verify_ms, d, k_max=k_max)

    def predicted_speedup(self, alpha: float, k: float, draft_ms: float | None = None) -> float:
        """Speedup over plain decoding for draft length k (a fractional mean k of an adaptive
        run is interpolated between the whole k on either side)."""
        d = self.draft if draft_ms is None else draft_ms
        lo = int(k)
        rate = [theory.speedup_with_cost(alpha, kk, self.verify_ms, d) for kk in (lo, lo + 1)]
        return (lo + 1 - k) * rate[0] + (k - lo) * rate[1]

    def observe_verify(self, n: int, ms: float) -> None:
        """Fold one timed target pass over n tokens into the estimate."""
        current = self.verify_ms(n)
        self.verify[n] = current + ONLINE_WEIGHT * (ms - current)
        self.verify = _never_cheaper(self.verify)

    def observe_draft(self, ms_per_token: float) -> None:
        self.draft += ONLINE_WEIGHT * (ms_per_token - self.draft)

    def copy(self) -> "CostModel":
        return CostModel(verify=dict(self.verify), draft=self.draft, source=self.source, meta=dict(self.meta))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verify"] = {str(n): v for n, v in self.verify.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        return cls(verify=d["verify"], draft=float(d["draft"]), source=d.get("source", "measured"), meta=d.get("meta", {}))


def _never_cheaper(verify: dict[int, float]) -> dict[int, float]:
    """The costs by size, each at least the cost of any smaller pass. A pass over more tokens
    does not cost less; a lower figure is noise of a single timed sweep (seen here: 842 ms
    for 4 tokens between 1086 for 3 and 1180 for 5), and taken at face value it made that
    draft length look cheap to the adaptive policy."""
    out, highest = {}, float("-inf")
    for n, v in sorted(verify.items()):
        highest = max(highest, v)
        out[n] = highest
    return out


# --- measuring -------------------------------------------------------------------------------


@torch.inference_mode()
def measure_pass_ms(model: torch.nn.Module, sizes: list[int], *, vocab_size: int, context: int = MEASURE_CONTEXT, repeats: int = 3, seed: int = 0) -> dict[int, float]:
    """Median ms of one forward pass over n new tokens after `context` cached tokens, for
    each n in `sizes`, with logits for every new position (as a verify pass needs). Sizes
    are interleaved within each repeat so machine drift hits them alike; one untimed sweep
    first warms the kernels up."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.randint(0, vocab_size, (1, context), generator=gen).to(device)
    cache = DynamicCache(config=model.config)
    model(input_ids=ctx, cache=cache, use_cache=True, logits_to_keep=1)
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
            if rep:
                times[n].append(ms)
    return {n: statistics.median(v) for n, v in times.items()}


def measure(pair, sizes=MEASURED_SIZES, *, repeats: int = 1) -> CostModel:
    """Time the pair's target over each of `sizes` new tokens and its draft over one."""
    verify = measure_pass_ms(pair.target, list(sizes), vocab_size=pair.vocab_size, repeats=repeats)
    drafter = pair.draft if pair.draft is not None else pair.target
    draft = measure_pass_ms(drafter, [1], vocab_size=pair.vocab_size, repeats=repeats)[1]
    return CostModel(verify=verify, draft=draft, source="measured", meta={"repeats": repeats, "context": MEASURE_CONTEXT})


def load_or_measure(pair, *, sizes=MEASURED_SIZES, cache_dir: Path | None = None, remeasure: bool = False, repeats: int = 1) -> CostModel:
    """The pair's cost model from the cache folder, or measured now and cached.

    The cache key is everything that changes the costs: pair, device, dtype, thread count,
    CPU / GPU, torch and transformers versions, and the sizes measured."""
    path = _cache_path(pair, sizes, cache_dir)
    if not remeasure and path.is_file():
        try:
            model = CostModel.from_dict(json.loads(path.read_text()))
            model.source = "cached"
            return model
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # a damaged cache file is measured again and replaced
    model = measure(pair, sizes, repeats=repeats)
    model.meta["key"] = _key_fields(pair, sizes)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(model.to_dict(), indent=1))
    os.replace(tmp, path)
    return model


def for_pair(pair) -> CostModel:
    """The pair's cost model, measured or read once per loaded pair and kept in `pair.info`."""
    model = pair.info.get("cost_model")
    if not isinstance(model, CostModel):
        model = load_or_measure(pair)
        pair.info["cost_model"] = model
    return model


def _key_fields(pair, sizes) -> dict:
    import transformers

    device = torch.device(pair.device)
    hw = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {
        "pair": pair.name,
        "device": str(device),
        "hardware": hw,
        "dtype": str(pair.dtype),
        "draft": pair.draft_precision,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sizes": list(sizes),
        "linear": "few-rows product, padded",  # models/small_batch.py changed what a pass costs
    }


def _cache_path(pair, sizes, cache_dir: Path | None) -> Path:
    key = json.dumps(_key_fields(pair, sizes), sort_keys=True)
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


# --- the adaptive-k policy -------------------------------------------------------------------

# Running acceptance: each round's counts weigh this much less per round that follows
# (about the last ten rounds count), starting from a prior of PRIOR_ALPHA over PRIOR_WEIGHT
# tested tokens.
ALPHA_MEMORY = 0.9
PRIOR_ALPHA = 0.6
PRIOR_WEIGHT = 2.0
# Calibration of the draft's confidence: acceptance counts per confidence bin, each bin
# starting from a prior that acceptance equals confidence, worth CALIBRATION_PRIOR tokens.
CONFIDENCE_BINS = 10
CALIBRATION_PRIOR = 3.0
# Weight of one timed round in the running round cost C(m) of its draft length m.
ROUND_WEIGHT = 0.3
# While drafting does not pay, probe with a drafted token after this many plain rounds,
# doubling the wait after each probe that changes nothing (a probe costs a draft pass, a
# larger verify pass and the draft's catch-up over the tokens it skipped).
PROBE_EVERY = 8
MAX_PROBE_EVERY = 64


class CostAwareLength(DraftLength):
    """Adaptive k that maximises expected tokens per ms (see the module docstring).

    A round that drafts m tokens costs C(m): m drafted tokens and a verify pass over m+1,
    plus everything else the engine does per round. C starts from the measured cost model,
    C(m) = m*D + V(m+1), and then learns from the rounds themselves: the policy times the
    interval between the starts of consecutive rounds, so what it optimises is what the
    user waits for, on this machine, at this moment.

    `draft_ms` overrides the model's D (a drafter other than the draft model).
    `confidence` says whether the drafter reports a meaningful confidence per token (a
    model does; prompt lookup does not): without it each round drafts the best fixed k.
    """

    def __init__(self, cost: CostModel, k_max: int, *, draft_ms: float | None = None, confidence: bool = True, clock=time.perf_counter):
        super().__init__(k_max)
        self.k_max = k_max
        self.use_confidence = confidence
        d = cost.draft if draft_ms is None else draft_ms
        self.prior = np.array([m * d + cost.verify_ms(m + 1) for m in range(k_max + 1)])
        self.observed = np.full(k_max + 1, np.nan)  # running C(m) where timed
        self._scale = 1.0  # running observed / prior, for the lengths not yet timed
        self._clock = clock
        self._accepted = PRIOR_ALPHA * PRIOR_WEIGHT
        self._tested = PRIOR_WEIGHT
        self._bin_acc = np.array([(i + 0.5) / CONFIDENCE_BINS * CALIBRATION_PRIOR for i in range(CONFIDENCE_BINS)])
        self._bin_n = np.full(CONFIDENCE_BINS, CALIBRATION_PRIOR)
        self._round_conf: list[float] = []
        self._p_all = 1.0
        self._rate = 0.0
        self._idle = 0
        self._probe_every = PROBE_EVERY
        self._started: float | None = None
        self._last_drafted: int | None = None

    @property
    def alpha(self) -> float:
        """Running estimate of the probability that a drafted token is accepted."""
        return self._accepted / self._tested

    def round_ms(self, m: int) -> float:
        """C(m): what a round drafting m tokens costs, as timed or else as predicted."""
        seen = self.observed[m]
        return float(seen) if seen == seen else float(self.prior[m] * self._scale)

    def choose(self, alpha: float) -> tuple[int, float]:
        """The draft length with the most expected tokens per ms, and that rate."""
        costs = np.array([self.round_ms(m) for m in range(self.k_max + 1)])
        rates = np.asarray(theory.tokens_per_round(alpha, np.arange(self.k_max + 1))) / costs
        k = int(np.argmax(rates))
        return k, float(rates[k])

    def limit(self) -> int:
        """Start a round: the most tokens it may draft (0: decode plainly this round)."""
        now = self._clock()
        if self._started is not None and self._last_drafted is not None:
            self._observe_round(self._last_drafted, (now - self._started) * 1000)
        self._started, self._last_drafted = now, None
        self._round_conf = []
        self._p_all = 1.0
        k, self._rate = self.choose(self.alpha)
        if k == 0:
            self._idle += 1
            if self._idle < self._probe_every:
                self.k = 0
                return 0
            # A probe that finds drafting still unprofitable makes the next one wait longer.
            self._probe_every = min(2 * self._probe_every, MAX_PROBE_EVERY)
            k = 1
        else:
            self._probe_every = PROBE_EVERY
        self._idle = 0
        self.k = self.k_max if self.use_confidence else k
        return self.k

    def keep_going(self, confidence: float) -> bool:
        """Draft one more token only if its expected tokens per added ms beat the rate."""
        self._round_conf.append(confidence)
        if not self.use_confidence:
            return True
        self._p_all *= self._calibrated(confidence)
        n = len(self._round_conf)
        # Look ahead past the next token: on a CPU the cost curve is steep for small passes
        # and flat after, so one more token may not pay where several more do.
        # The drafts to come are taken to be as likely accepted as this one (a confident
        # draft tends to stay confident), so a confident probe can show that drafting pays.
        a_next = self._calibrated(confidence)
        p, gain, base = self._p_all, 0.0, self.round_ms(n)
        for j in range(n + 1, self.k_max + 1):
            p *= a_next
            gain += p
            added_ms = self.round_ms(j) - base
            if added_ms <= 0 or gain / added_ms >= self._rate:
                return True
        return False

    def update(self, drafted: int, accepted: int, *, verify_ms: float = 0.0, draft_ms: float = 0.0) -> None:
        # The round's own pass timings are not needed: the next limit() times the whole round.
        self._last_drafted = drafted
        if drafted == 0:
            return
        tested = min(accepted + 1, drafted)
        self._accepted = ALPHA_MEMORY * self._accepted + accepted
        self._tested = ALPHA_MEMORY * self._tested + tested
        for i, c in enumerate(self._round_conf[:tested]):
            b = self._bin(c)
            self._bin_n[b] += 1
            self._bin_acc[b] += i < accepted

    def _observe_round(self, m: int, ms: float) -> None:
        seen = self.observed[m]
        self.observed[m] = ms if seen != seen else seen + ROUND_WEIGHT * (ms - seen)
        self._scale += ROUND_WEIGHT * (ms / self.prior[m] - self._scale)

    def _bin(self, confidence: float) -> int:
        return min(int(confidence * CONFIDENCE_BINS), CONFIDENCE_BINS - 1)

    def _calibrated(self, confidence: float) -> float:
        b = self._bin(confidence)
        return float(self._bin_acc[b] / self._bin_n[b])


def policy_for(pair, settings) -> CostAwareLength:
    """The cost-aware adaptive-k policy for a run of `settings` on `pair`, up to k =
    settings.k, with D for the drafter the settings name."""
    cost = for_pair(pair).copy()
    if settings.drafter == "lookup":
        return CostAwareLength(cost, settings.k, draft_ms=0.0, confidence=False)
    if settings.drafter == "early-exit":
        from specviz.drafters.early_exit import default_layers

        layers = settings.early_exit_layers or default_layers(pair.target)
        # The first L of the target's layers cost about L / all of a one-token pass.
        return CostAwareLength(cost, settings.k, draft_ms=cost.target * layers / pair.target.config.num_hidden_layers)
    return CostAwareLength(cost, settings.k)
