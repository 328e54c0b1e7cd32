"""The child process `engine.runtime_prepare` starts: load a pair on one runtime, which
prepares its files and times its passes into the cache, at the lowest CPU priority, ending
with the page that started it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

from specviz.engine.runtime_prepare import NICE


def main(argv: list[str]) -> int:
    """`python -m specviz.engine.prepare_child SPEC RUNTIME`: load SPEC on RUNTIME, which
    prepares its files and times and records its passes; one preparation at a time per cache."""
    spec, runtime = argv
    os.nice(NICE)
    _die_with_parent()
    from specviz.engine.load import load
    from specviz.errors import UserError
    from specviz.models.files.cache import locked

    def progress(fraction: float, message: str) -> None:
        print(f"{100 * fraction:3.0f}% {message}", flush=True)

    try:
        with locked(f"prepare-{runtime}"):
            pair = load(spec, runtime=runtime, progress=progress)
    except UserError as e:
        print(f"{runtime} could not be prepared: {e}", flush=True)
        return 1
    rates = pair.runtime_choice.rates.get(runtime) or {}
    print(
        f"{runtime} timed: plain {rates.get('plain', 0):.1f} tok/s, drafting {rates.get('speculative', 0):.1f}",
        flush=True,
    )
    return 0


def _die_with_parent() -> None:
    """Linux: end this process when the page that started it ends, however it ends."""
    with contextlib.suppress(OSError, AttributeError):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
