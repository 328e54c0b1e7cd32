"""Preparing and timing, in the background, a runtime that `auto` could not judge yet.

On a cold cache `auto` starts on llama.cpp (ready in seconds) without converting the torch
copy just to decide (runtime_choice). A long-lived process (the page) then prepares the
other runtime in a child process of its own: the child loads the pair there (converting it
first where that runtime needs it), which times its passes and records its rates
(`engine.load`). It runs at the lowest CPU priority and is stopped (SIGSTOP) while any run
of the page's models is under way (`holding`), and while the page times a pair's passes at
load (`held`, so that costs priced then are this machine's): a lower priority alone is not enough, since
a conversion writing gigabytes evicts the running model's memory-mapped weights (a first
run on the page went from about 9 to 1.1 tokens/s beside one). From then on `auto`
compares measured rates; a pair loaded by `auto` whose choice now differs is loaded again on
the faster runtime at its next run (`switch_to`), and the status line says so.

SPECVIZ_PREPARE=0 turns the child off (a Space with little memory: a torch conversion holds
several GB while it runs).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specviz.choices import AUTO
from specviz.yes_no import yes_no

ENV = "SPECVIZ_PREPARE"
# The child's CPU priority (os.nice): last in line behind the page's own runs.
NICE = 19


@dataclass
class Preparation:
    spec: str
    runtime: str
    process: subprocess.Popen
    log: Path

    @property
    def state(self) -> str:
        """One of "running", "done" or "failed"."""
        code = self.process.poll()
        return "running" if code is None else "done" if code == 0 else "failed"

    def last_line(self) -> str:
        try:
            lines = [line.strip() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""


_lock = threading.Lock()
_started: dict[tuple[str, str], Preparation] = {}
_runs = 0  # runs of the page's models under way (`holding`)


def enabled(env=os.environ) -> bool:
    return yes_no(env.get(ENV)) is not False


def start(spec: str, runtime: str) -> Preparation:
    """The preparation of `runtime` for `spec`, started now unless this process already has."""
    from specviz.models.files.cache import cache_root, file_name

    with _lock:
        prep = _started.get((spec, runtime))
        if prep is not None and prep.state != "failed":
            return prep
        folder = cache_root() / "runtime-choice"
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"prepare-{file_name(f'{spec}-{runtime}')}.log"
        with open(log, "w") as out:
            # In the page's process group, so stopping the page stops it too.
            process = subprocess.Popen(
                [sys.executable, "-m", "specviz.engine.prepare_child", spec, runtime],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        prep = _started[(spec, runtime)] = Preparation(spec, runtime, process, log)
        if _runs:
            _signal(prep, signal.SIGSTOP)
        return prep


@contextlib.contextmanager
def held() -> Iterator[None]:
    """While a run of the models is under way: every preparation stopped, continued after
    the last run ends."""
    global _runs
    with _lock:
        _runs += 1
        if _runs == 1:
            for prep in _started.values():
                _signal(prep, signal.SIGSTOP)
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0:
                for prep in _started.values():
                    _signal(prep, signal.SIGCONT)


def holding(fn: Callable) -> Callable:
    """`fn` (a function or a generator function that runs the models) inside `held`."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args, **kwargs):
            with held():
                yield from fn(*args, **kwargs)

        return generator

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with held():
            return fn(*args, **kwargs)

    return call


# How long a stop may take to land before the run goes on anyway (the signal is asynchronous).
STOP_WAIT_S = 1.0


def _signal(prep: Preparation, sig: int) -> None:
    if prep.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            prep.process.send_signal(sig)
        if sig == signal.SIGSTOP:
            _wait_stopped(prep.process.pid)


def _wait_stopped(pid: int) -> None:
    """Until the process shows as stopped (Linux's /proc), so the run's first pass has the
    CPU to itself; elsewhere, or past STOP_WAIT_S, go on."""
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("T", "t", "Z", "X"):
            return
        time.sleep(0.002)


def preparations(spec: str) -> list[Preparation]:
    with _lock:
        return [p for (s, _), p in _started.items() if s == spec]


def switch_to(pair) -> str | None:
    """The runtime `auto` picks for `pair` now, where the pair was loaded by `auto` and that
    pick is another runtime (measured since the load); else None."""
    from specviz.costs.runtime_choice import choose

    c = getattr(pair, "runtime_choice", None)  # a PairLoader hands out whatever its load returns
    if c is None or c.requested != AUTO or not c.spec:
        return None
    now = choose(c.spec, AUTO).runtime
    return now if now != pair.runtime else None
