"""Hugging Face ZeroGPU: a GPU lent per call, for the seconds the call asks for.

On ZeroGPU (the `spaces` package, with SPACES_ZERO_GPU set) each function that runs the models
holds a GPU only while it runs (`gpu`). ZeroGPU checks the *requested* seconds against what the
visitor has left of a daily quota (2 minutes for visitors who are not logged in, 5 for free
accounts) and queues shorter requests ahead, so a run asks for what it needs: `grant_s` prices
it from its max_new_tokens at the pair's decode rate and its prompt at the pair's prefill rate,
each the median of what recent runs measured on the GPU (`RATES`), with a margin; the run stops
itself GRANT_MARGIN_S before the grant ends, with its tokens and a time-limit stop reason. A
visitor whose quota is spent is told so in words, with when to come back (`quota_message`).
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import statistics
import threading
from collections import OrderedDict
from collections.abc import Callable

from specviz.errors import UserError

log = logging.getLogger(__name__)

# Before the first run on the GPU: a 7B bf16 target decodes a token in about 30 ms when
# launches, not bytes, bound it; twice that, so a first run does not end early.
PRIOR_S_PER_TOKEN = 0.06
# A 7B target's prefill on a GPU reads thousands of prompt tokens a second; before any run, 2,000.
PRIOR_S_PER_PROMPT_TOKEN = 0.0005
# A measured rate counts within these bounds: a run that waited on another's passes, or one
# that measured nothing, neither raises nor zeroes the price.
S_PER_TOKEN_RANGE = (0.002, 0.5)
S_PER_PROMPT_TOKEN_RANGE = (1e-5, 0.02)
# A prompt's tokens before it is tokenized: English runs about four characters a token, code
# and other scripts fewer; two over-counts them, so a long prompt's prefill is not priced short.
CHARS_PER_TOKEN = 2
# Rates are the median over the newest run of each of this many recent callers (sessions): one
# caller's runs count once, so moving the price takes most of the Space's recent callers.
RATES_KEPT = 31
# Taking the GPU and the first CUDA calls.
SETUP_S = 8.0
# Speculative decoding on a prompt where drafts miss costs more per token than plain decoding
# (the cost-aware policy then stops drafting); priced at this many times the measured rate.
SLOWER = 1.5
MIN_GRANT_S = 10
# What one run may ask for: ZeroGPU refuses more than the visitor's quota, and a visitor who is
# not logged in has 120 s a day.
MAX_GRANT_S = 120
GRANT_MARGIN_S = 5  # the run stops this long before its grant ends


class QuotaSpent(UserError):
    """ZeroGPU refused a run for the visitor's quota: shown as a notice, not an error."""


def _clamped(x: float, bounds: tuple[float, float]) -> float:
    return min(bounds[1], max(bounds[0], x))


class Rates:
    """What finished runs measured on the GPU, per pair: seconds per generated token after the
    first (decoding) and per prompt token (the prefill, which gives the first token), each the
    median over the newest run of each of the last RATES_KEPT callers, clamped. Kept in the
    page's process: ZeroGPU runs each call in a child process, and the trace it returns
    carries the run's times and tokens."""

    def __init__(self, kept: int = RATES_KEPT):
        self._lock = threading.Lock()
        self._kept = kept
        self._decode: dict[str, OrderedDict[str, float]] = {}
        self._prefill: dict[str, OrderedDict[str, float]] = {}

    def observe(
        self, pair: str, *, wall_s: float, new_tokens: int, prefill_s: float, prompt_tokens: int, caller: str = ""
    ) -> None:
        """One finished run: `prefill_s` the time to its first token (a pass over its
        `prompt_tokens`), `wall_s` its whole time for `new_tokens`."""
        if not all(math.isfinite(x) and x > 0 for x in (wall_s, prefill_s)) or prefill_s > wall_s:
            return
        with self._lock:
            if prompt_tokens > 0:
                self._keep(self._prefill, pair, caller, _clamped(prefill_s / prompt_tokens, S_PER_PROMPT_TOKEN_RANGE))
            if new_tokens > 1:  # the prefill gave the first token; a one-token run says nothing of decoding
                rate = (wall_s - prefill_s) / (new_tokens - 1)
                self._keep(self._decode, pair, caller, _clamped(rate, S_PER_TOKEN_RANGE))

    def _keep(self, rates: dict[str, OrderedDict[str, float]], pair: str, caller: str, rate: float) -> None:
        by_caller = rates.setdefault(pair, OrderedDict())
        by_caller.pop(caller, None)
        by_caller[caller] = rate
        while len(by_caller) > self._kept:
            by_caller.popitem(last=False)

    def s_per_token(self, pair: str) -> float:
        """Seconds per decoded token: the recent callers' median, else the prior."""
        with self._lock:
            kept = self._decode.get(pair)
            return statistics.median(kept.values()) if kept else PRIOR_S_PER_TOKEN

    def s_per_prompt_token(self, pair: str) -> float:
        """Seconds per prompt token of the prefill: the recent callers' median, else the prior."""
        with self._lock:
            kept = self._prefill.get(pair)
            return statistics.median(kept.values()) if kept else PRIOR_S_PER_PROMPT_TOKEN


RATES = Rates()


def observe_trace(pair: str, trace, caller: str = "") -> None:
    """A finished run's trace told to RATES: its first event's time is the prefill's."""
    if not trace.events:
        return
    RATES.observe(
        pair,
        wall_s=trace.summary.wall_s,
        new_tokens=trace.summary.new_tokens,
        prefill_s=trace.events[0].t_end_s,
        prompt_tokens=int(trace.meta.get("prompt_tokens") or 0),
        caller=caller,
    )


def prompt_tokens(prompt: str) -> int:
    """A prompt's tokens, counted generously before it is tokenized (CHARS_PER_TOKEN)."""
    return math.ceil(len(prompt) / CHARS_PER_TOKEN)


def grant_s(
    max_new_tokens: int,
    s_per_token: float,
    *,
    cap_s: float = MAX_GRANT_S,
    prompt_tokens: int = 0,
    s_per_prompt_token: float = PRIOR_S_PER_PROMPT_TOKEN,
) -> int:
    """Seconds of GPU one run asks for: setup, the prompt's prefill, then max_new_tokens at
    SLOWER times the decode rate, within [MIN_GRANT_S, min(MAX_GRANT_S, cap_s)] (cap_s: the
    operator's limit on a run)."""
    prefill = max(0, prompt_tokens) * max(0.0, s_per_prompt_token)
    wanted = SETUP_S + prefill + SLOWER * max(0, max_new_tokens) * max(0.0, s_per_token)
    return clamp_grant(wanted, cap_s)


def clamp_grant(wanted_s: float, cap_s: float = MAX_GRANT_S) -> int:
    """`wanted_s` in whole seconds within [MIN_GRANT_S, min(MAX_GRANT_S, cap_s)]."""
    top = max(MIN_GRANT_S, min(MAX_GRANT_S, math.floor(cap_s)))
    if not math.isfinite(wanted_s):
        return top
    return int(min(top, max(MIN_GRANT_S, math.ceil(wanted_s))))


def run_limit_s(grant: int) -> float:
    """How long a run granted `grant` seconds may take before it stops itself."""
    return max(1.0, grant - GRANT_MARGIN_S)


def grant_for_limit(limit_s: float | None) -> int:
    """The grant a run that stops itself after `limit_s` asks for (the margin on top)."""
    if limit_s is None or not math.isfinite(limit_s):
        return MAX_GRANT_S
    return int(min(MAX_GRANT_S, max(MIN_GRANT_S, math.ceil(limit_s) + GRANT_MARGIN_S)))


def grants(limit_for: Callable[[int], float]) -> dict[int, int]:
    """The grant a run of 16, 128 and 512 new tokens asks for, `limit_for(max_new_tokens)`
    being a run's limit: what the launch log and the status endpoint tell."""
    return {n: grant_for_limit(limit_for(n)) for n in (16, 128, 512)}


def duration_from(fn: Callable, arg: str = "max_wall_s") -> Callable[..., int]:
    """spaces.GPU's `duration` for `fn`: the grant for the run limit `fn` is called with."""
    signature = inspect.signature(fn)

    def duration(*args, **kwargs) -> int:
        return grant_for_limit(signature.bind(*args, **kwargs).arguments.get(arg))

    return duration


def log_start(pair: str, state, limit_for: Callable[[int], float]) -> None:
    """Say in the log where the pair went before launch and what runs of a few lengths would ask
    for, `limit_for(max_new_tokens)` being a run's limit (a Space's log, and the dry run in
    scripts/space_check.py, read it)."""
    if state.error is not None:
        log.error("ZeroGPU: %s did not load before launch: %s", pair, state.error)
        return
    log.info(
        "ZeroGPU: %s loaded on %s (%s) before launch; grants by new tokens: %s",
        pair,
        getattr(state.pair, "device", "?"),
        getattr(state.pair, "runtime", "?"),
        grants(limit_for),
    )


def installed():
    """The `spaces` module where it can be imported, else None."""
    return _spaces


def gpu(fn: Callable, duration: int | Callable[..., int]) -> Callable:
    """`fn`, holding a ZeroGPU grant of `duration` seconds (or `duration(*args)`) while it runs,
    where the `spaces` package is installed; `fn` itself elsewhere (spaces.GPU returns it as it
    is off ZeroGPU). ZeroGPU runs it in another process: its arguments must be plain values."""
    if _spaces is None:
        return fn
    return _spaces.GPU(duration=duration)(fn)


def quota_message(error: BaseException) -> str | None:
    """The words for a visitor when `error` is ZeroGPU refusing a run for quota; else None."""
    title = str(getattr(error, "title", "") or "")
    text = str(getattr(error, "message", "") or error)
    if "ZeroGPU" not in title or "quota" not in (title + text).lower():
        return None
    asked = re.search(r"\((\d+)s requested vs\. (\d+)s left\)", text)
    wait = re.search(r"Try again in ([\d:]+)", text)
    if asked:
        said = f"This run asked ZeroGPU for {asked.group(1)} s of GPU time and your quota has {asked.group(2)} s left."
    else:
        said = "ZeroGPU's quota for visitors who are not logged in (2 minutes a day) is spent."
    when = (
        f"It refills over the day: try again in {wait.group(1)}" if wait else "It refills over the day: try again later"
    )
    return (
        f"{said} {when}, or ask for fewer new tokens (a shorter run asks for less GPU time). Logged-in "
        "Hugging Face accounts get 5 minutes a day, PRO accounts 40."
    )


ON_ZERO_GPU = False  # SPACES_ZERO_GPU set: every model run holds a ZeroGPU grant
try:  # pragma: no cover - only where the spaces package is installed
    import spaces as _spaces
    from spaces.config import Config as _SpacesConfig

    ON_ZERO_GPU = bool(_SpacesConfig.zero_gpu)
except ImportError:
    _spaces = None
