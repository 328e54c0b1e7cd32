"""Progress on the command line: `[ 42%] what is happening` on stderr, a line per new step
(or per percent, for a stage that reports every item), readable on a terminal and in CI logs."""

from __future__ import annotations

import sys
from collections.abc import Callable


def lines(*, per_percent: bool = False, terminal_only: bool = False) -> Callable[[float, str], None]:
    """A `progress(fraction, message)` callback. `terminal_only`: silent when stderr is not a
    terminal, so a script reading stderr gets only an error's one line."""
    last: list[object] = [None]

    def report(fraction: float, message: str) -> None:
        if terminal_only and not sys.stderr.isatty():
            return
        step = int(fraction * 100) if per_percent else message
        if step != last[0]:
            last[0] = step
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)

    return report
