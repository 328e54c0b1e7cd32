"""Hugging Face ZeroGPU: a GPU lent per call, for the seconds the call asks for.

On ZeroGPU (the `spaces` package, with SPACES_ZERO_GPU set) each function that runs the models
holds a GPU only while it runs (`gpu`). ZeroGPU checks the *requested* seconds against what the
visitor has left of a daily quota (2 minutes for visitors who are not logged in, 5 for free
accounts) and queues shorter requests ahead, so a run asks for what it needs: `grant_s` prices
it from its max_new_tokens and the seconds per token that earlier runs of the pair measured on
the GPU (`RATES`), with a margin, and the run stops itself GRANT_MARGIN_S before the grant
ends, with its tokens and a time-limit stop reason. A visitor whose quota is spent is told so
in words, with when to come back (`quota_message`).
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import threading
from collections.abc import Callable

from specviz.errors import UserError

log = logging.getLogger(__name__)

# Before the first run on the GPU: a 7B bf16 target decodes a token in about 30 ms when
# launches, not bytes, bound it; twice that, so a first run does not end early.
PRIOR_S_PER_TOKEN = 0.06
# Taking the GPU, the first CUDA calls and the prompt's prefill.
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


class Rates:
    """Seconds per generated token that finished runs measured on the GPU, per pair (the
    newest run's). Kept in the page's process: ZeroGPU runs each call in a child process, and
    the trace it returns carries the run's wall time and tokens."""

    def __init__(self):
        self._lock = threading.Lock()
        self._s_per_token: dict[str, float] = {}

    def observe(self, pair: str, wall_s: float, tokens: int) -> None:
        if tokens > 0 and math.isfinite(wall_s) and wall_s > 0:
            with self._lock:
                self._s_per_token[pair] = wall_s / tokens

    def s_per_token(self, pair: str) -> float:
        with self._lock:
            return self._s_per_token.get(pair, PRIOR_S_PER_TOKEN)


RATES = Rates()


def grant_s(max_new_tokens: int, s_per_token: float, *, cap_s: float = MAX_GRANT_S) -> int:
    """Seconds of GPU one run asks for: setup, then max_new_tokens at SLOWER times the rate,
    within [MIN_GRANT_S, min(MAX_GRANT_S, cap_s)] (cap_s: the operator's limit on a run)."""
    wanted = SETUP_S + SLOWER * max(0, max_new_tokens) * max(0.0, s_per_token)
    top = max(MIN_GRANT_S, min(MAX_GRANT_S, math.floor(cap_s)))
    return int(min(top, max(MIN_GRANT_S, math.ceil(wanted))))


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
