"""Model pairs load in a background thread, so the page answers while they do.

A run asks for the pair it needs and waits, reporting the load's progress to the page; a
load that failed keeps its message for the page, and the next request for that pair tries
again. Loads run one at a time; the loaded models themselves are kept (and shared between
sessions) by specviz.models.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specviz.choices import AUTO
from specviz.errors import UserError
from specviz.lm.resident import settle_heap
from specviz.models.progress import Progress

log = logging.getLogger(__name__)


class Cancelled(Exception):
    """The user pressed Stop while the run was still waiting for its models."""


@dataclass
class LoadState:
    name: str
    with_draft: bool
    runtime: str = AUTO
    fraction: float = 0.0
    message: str = "waiting to load"
    started: float = field(default_factory=time.monotonic)
    pair: Any = None  # the ModelPair once loaded
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def ready(self) -> bool:
        return self.done.is_set() and self.error is None


def _default_load(name: str, *, with_draft: bool, progress: Progress, runtime: str = AUTO) -> Any:
    from specviz.engine.load import load  # imported here: torch and transformers load slowly

    return load(name, with_draft=with_draft, progress=progress, runtime=runtime, prepare_untimed=True)


def _default_switch(pair: Any) -> str | None:
    from specviz.engine.runtime_prepare import switch_to

    return switch_to(pair)


class PairLoader:
    """Loads pairs one at a time in daemon threads and remembers how each load went."""

    def __init__(self, load: Callable[..., Any] = _default_load, switch: Callable[[Any], str | None] = _default_switch):
        self._load, self._switch = load, switch
        self._lock = threading.Lock()
        self._one_load_at_a_time = threading.Lock()
        self._states: dict[tuple[str, str], LoadState] = {}
        self._latest: dict[str, LoadState] = {}  # per pair name, its load on the runtime asked for last

    def request(self, name: str, *, with_draft: bool = True, runtime: str = AUTO, here: bool = False) -> LoadState:
        """The state of `name`'s load on `runtime`, starting it if nothing usable is loaded or
        loading; `here`: loaded in the calling thread, done when this returns (ZeroGPU places
        models on CUDA through a mode that only the main thread has)."""
        with self._lock:
            self._forget_unloaded()
            state = self._states.get((name, runtime))
            usable = state is not None and state.error is None and (state.with_draft or not with_draft)
            if usable and runtime == AUTO and state.ready and self._switch(state.pair):
                usable = False  # measured since: `auto` now picks another runtime, loaded at this run
            if usable:
                self._latest[name] = state
                return state
            state = LoadState(name, with_draft, runtime)
            self._states[(name, runtime)] = self._latest[name] = state
        if here:
            self._run(state)
        else:
            threading.Thread(target=self._run, args=(state,), name=f"load {name}", daemon=True).start()
        return state

    def _forget_unloaded(self) -> None:
        """Drop the states of pairs unloaded since (`ModelPair.close`): a state holding one
        would keep its models in memory, and the next request for it loads it again."""
        for states in (self._states, self._latest):
            for key, state in list(states.items()):
                if getattr(state.pair, "closed", False):
                    del states[key]

    def status(self, name: str) -> LoadState | None:
        with self._lock:
            return self._latest.get(name)

    def wait(
        self,
        name: str,
        *,
        with_draft: bool = True,
        runtime: str = AUTO,
        on_progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        poll_s: float = 0.25,
    ) -> Any:
        """The loaded pair; raises UserError if it cannot load, Cancelled on Stop."""
        state = self.request(name, with_draft=with_draft, runtime=runtime)
        while not state.done.wait(poll_s):
            if should_stop is not None and should_stop():
                raise Cancelled
            if on_progress is not None:
                on_progress(state.fraction, state.message)
        if state.error is not None:
            raise UserError(state.error)
        return state.pair

    def _run(self, state: LoadState) -> None:
        def progress(fraction: float, message: str) -> None:
            state.fraction, state.message = max(0.0, min(1.0, float(fraction))), str(message)

        with self._one_load_at_a_time:
            state.started = time.monotonic()
            try:
                state.pair = self._load(
                    state.name, with_draft=state.with_draft, progress=progress, runtime=state.runtime
                )
                state.fraction, state.message = 1.0, "loaded"
                if self._load is _default_load:  # models were loaded (not a test's stand-in)
                    settle_heap()
            except UserError as e:
                state.error = str(e)
            except Exception as e:  # a bug or a broken file: keep the traceback in the log
                log.exception("loading %s failed", state.name)
                state.error = f"could not load {state.name}: {type(e).__name__}: {e}"
            state.done.set()
