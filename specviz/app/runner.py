"""Where a page request meets the models: wait for the pair, then iterate the engine.

The loader and the Stop flags are process-wide: every browser session shares the one loaded
pair, and each session has its own Stop. On Hugging Face ZeroGPU (the `spaces` package can
be imported) every function that runs the models (a generation here, the labs' sweep point
and batch timing) is wrapped by `runs_models`, so it holds a GPU only while it runs; its
arguments are plain values, looked up inside, because ZeroGPU runs it in another process.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from specviz.app import zero_gpu
from specviz.app.background import newest
from specviz.app.config import PageConfig
from specviz.app.loading import Cancelled, PairLoader
from specviz.app.server_details import for_visitors
from specviz.app.session_outputs import SessionOutputs
from specviz.app.stopping import StopFlags
from specviz.choices import AUTO
from specviz.engine.runtime_prepare import holding
from specviz.errors import UserError, shown
from specviz.events import Trace
from specviz.models.catalogue.presets import PRESETS
from specviz.models.catalogue.sources import ARROW, HUB_ID
from specviz.models.progress import Progress
from specviz.settings import GenerationSettings

log = logging.getLogger(__name__)

LOADER = PairLoader()
FLAGS = StopFlags()
OUTPUTS = SessionOutputs()  # the Live tab's earlier outputs per session, for the suffix drafter
# Rounds closer together than this are sent as one update: a browser redrawing the stream and
# the timeline cannot keep up with a GPU's tens of rounds a second, and the API's messages
# (the whole trace so far) would grow as the square of the run's length.
MIN_UPDATE_S = 0.2
# Each update is the whole run so far, built, sent and drawn again (the page's stream, the API's
# trace), at a cost that grows with its tokens, so updates space out with them, up to
# UPDATE_MAX_S apart: on a small CPU that work takes the cores the run is using
# (docs/BENCHMARKS.md, "The page's own cost").
UPDATE_MS_PER_TOKEN = 7.5
UPDATE_MAX_S = 1.0


def update_interval_s(trace: Trace) -> float:
    """How long a run's stream waits after sending `trace` before it sends the next."""
    grown = len(trace.token_ids) * UPDATE_MS_PER_TOKEN / 1000
    return min(UPDATE_MAX_S, max(MIN_UPDATE_S, grown))


def check_pair(spec: Any, config: PageConfig) -> Any:
    """`spec`, unless the page is reachable beyond this machine and it names local files.

    A public page loads only its own pairs (`PageConfig.public_pairs`). On a page bound to
    another address, a visitor's pair may be presets and Hub ids only: a path would let
    strangers make the server read its disk. The operator's own default pair (set at launch)
    is always allowed. Anything else is checked when the pair is resolved.
    """
    if config.public:
        if not isinstance(spec, str) or spec.strip() not in config.public_pairs:
            named = repr(spec) if isinstance(spec, str) and len(spec) <= 80 else "that pair"
            raise UserError(f"{named}: this page loads only {', '.join(config.public_pairs)} (SPECVIZ_PAIRS)")
        return spec.strip()
    if config.local_only or not isinstance(spec, str) or spec.strip() == config.default_pair:
        return spec
    for part in (s.strip() for s in spec.split(ARROW)):
        if part and part not in PRESETS and (not HUB_ID.match(part) or Path(part).expanduser().exists()):
            raise UserError(
                f"{shown(part)}: this page only loads presets and Hub ids; local files and folders can be "
                "named by the operator (SPECVIZ_DEFAULT_PAIR) or on a page bound to 127.0.0.1"
            )
    return spec


def check_runtime(runtime: str, config: PageConfig, pair_name: Any = None) -> str:
    """`runtime`, unless a public page is asked for another than the operator's (`auto`) or
    the one `auto` loaded `pair_name` on (side by side reruns a run on the runtime it used):
    each runtime loads a pair of its own, and the torch one converts the bundled files for
    minutes."""
    if not config.public or runtime == AUTO:
        return runtime
    state = LOADER.status(pair_name) if isinstance(pair_name, str) else None
    if state is not None and state.ready and getattr(state.pair, "runtime", None) == runtime:
        return runtime
    raise UserError(f"runtime {shown(runtime)}: this page runs its pairs on the runtime its operator chose ({AUTO})")


def loading(progress, pair_name: Any) -> Progress | None:
    """A pair's load told on the page's progress bar (`progress`: Gradio's, or None)."""
    if progress is None:
        return None
    return lambda fraction, message: progress(fraction, desc=f"Loading {pair_name}: {message}")


def stream(
    pair_name: str,
    prompt: str,
    settings: GenerationSettings,
    session: str,
    config: PageConfig,
    *,
    on_progress: Progress | None = None,
    min_interval_s: float | Callable[[Trace], float] = update_interval_s,
    remember: bool = False,
) -> Iterator[Trace]:
    """The trace after each round (speculative) or token (plain), then the finished trace.

    Waits for the pair first, reporting its load through `on_progress`. A new run in the
    same session, or Stop, ends this one before its next round (stop_reason "cancelled").
    The run goes on in a thread of its own while the caller handles each trace (see
    `background.newest`): rounds that end within `min_interval_s` (by default
    `update_interval_s` of the trace) of the last trace sent, or
    while the caller is busy, go out as one (the newest); the first round and the finished
    trace (the only one with a stop reason) always go. Closing the iterator stops the run.
    The pair is checked first (`check_pair`: a public page loads no local files, even one an
    uploaded trace names); a run stops after `run_wall_s(config)`. With `remember` (the Live
    tab) the session's earlier outputs on this pair join the suffix drafter's corpus and a
    finished run's output joins them (`session_outputs`).
    """
    pair_name = checked(pair_name, settings, config)  # before the session's previous run is stopped
    flag = FLAGS.begin(session)
    try:
        _wait_for_pair(pair_name, settings, config, on_progress, flag.is_set)
        history = OUTPUTS.get(session, str(pair_name)) if remember else []
        last = None
        for last in newest(
            _generate(pair_name, prompt, settings, session, run_wall_s(config, settings, pair_name, prompt), history),
            min_interval_s=min_interval_s,
            stop=flag.set,
        ):
            if flag.is_set() and not last.summary.stop_reason:
                # Stopped, or replaced by a new run: the page already shows the run as it stood,
                # marked stopped; a round still on its way must not show it running again.
                continue
            yield for_visitors(last)  # a public page's copy names nothing of the server
        if last is not None and last.summary.stop_reason:
            _finished(last, pair_name, session, remember)
    except Cancelled:
        return
    except Exception as e:
        words = zero_gpu.quota_message(e)
        if words is None:
            raise
        raise zero_gpu.QuotaSpent(words) from None
    finally:
        FLAGS.finish(session, flag)


def _wait_for_pair(
    pair_name: Any,
    settings: GenerationSettings,
    config: PageConfig,
    on_progress: Progress | None,
    should_stop: Callable[[], bool],
) -> None:
    """Until the pair (with its draft where the settings need one) is loaded on their runtime;
    a public page holds one pair at a time."""
    if config.public:
        one_pair_at_a_time(pair_name)
    LOADER.wait(
        pair_name,
        with_draft=settings.needs_draft,
        runtime=settings.runtime,
        on_progress=on_progress,
        should_stop=should_stop,
    )


def _finished(trace: Trace, pair_name: Any, session: str, remember: bool) -> None:
    """A finished run's output joins the session's outputs (with `remember`); on ZeroGPU its
    rates tell later runs how long they may take (the session's newest run counts once)."""
    if remember:
        OUTPUTS.add(session, str(pair_name), list(trace.token_ids))
    if zero_gpu.ON_ZERO_GPU:
        zero_gpu.observe_trace(str(pair_name), trace, session)


def checked(pair_name: Any, settings: GenerationSettings, config: PageConfig) -> Any:
    """The pair, once it and the runtime the settings ask for are allowed here."""
    pair_name = check_pair(pair_name, config)
    check_runtime(settings.runtime, config, pair_name)
    return pair_name


def load(pair_name: Any, settings: GenerationSettings, config: PageConfig) -> Any:
    """Start loading the pair a run with `settings` would need (checked as for a run); its state."""
    pair_name = checked(pair_name, settings, config)
    if config.public:
        one_pair_at_a_time(pair_name)
    return LOADER.request(pair_name, runtime=settings.runtime)


def one_pair_at_a_time(pair_name: str) -> None:
    """On a public page, before a pair that is not loaded loads, the idle loaded ones are
    unloaded (a pair a run is using stays until that run ends): visitors choosing pairs in
    turn never make the process hold them all."""
    from specviz.lm import resident

    state = LOADER.status(pair_name)
    if state is None or not state.ready or getattr(state.pair, "closed", False):
        resident.unload_others()


def run_wall_s(
    config: PageConfig,
    settings: GenerationSettings,
    pair_name: str = "",
    prompt: str = "",
    *,
    on_zero_gpu: bool | None = None,
) -> float:
    """How long one page run may take: the operator's cap; on ZeroGPU what its grant, priced
    from its prompt and max_new_tokens at the pair's measured rates there, covers
    (`zero_gpu.grant_s`)."""
    if not (zero_gpu.ON_ZERO_GPU if on_zero_gpu is None else on_zero_gpu):
        return config.max_wall_s
    pair = str(pair_name)
    grant = zero_gpu.grant_s(
        settings.max_new_tokens,
        zero_gpu.RATES.s_per_token(pair),
        cap_s=config.max_wall_s,
        prompt_tokens=zero_gpu.prompt_tokens(prompt),
        s_per_prompt_token=zero_gpu.RATES.s_per_prompt_token(pair),
    )
    return zero_gpu.run_limit_s(grant)


def _generate(
    pair_name: str,
    prompt: str,
    settings: GenerationSettings,
    session: str,
    max_wall_s: float | None,
    history: list[list[int]] | None = None,
) -> Iterator[Trace]:
    from specviz.engine import start  # torch: imported on first use so the page starts fast

    pair = LOADER.wait(pair_name, with_draft=settings.needs_draft, runtime=settings.runtime)
    flag = FLAGS.current(session)
    generation = start(
        pair, prompt, settings, should_stop=flag.is_set if flag else None, max_wall_s=max_wall_s, history=history
    )
    for _ in generation:
        yield generation.trace()
    yield generation.trace()  # the same events, now with the stop reason


def runs_models(fn: Callable, duration: int | Callable[..., int] | None = None) -> Callable:
    """`fn`, a function that runs the models, with any background timing of another runtime
    stopped while it runs (`holding`), and holding a ZeroGPU grant meanwhile where the `spaces`
    package is installed (`duration` seconds; by default the grant for the `max_wall_s` it is
    called with). ZeroGPU runs it in another process, so its arguments cross as plain values:
    settings as their dict, made settings again on the other side (they were checked when first
    made); no callbacks, no models."""
    fn = holding(fn)
    if zero_gpu.installed() is None:
        return fn
    duration = zero_gpu.duration_from(fn) if duration is None else duration
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def crossed(*args):
            yield from fn(*_settings_again(args))
    else:

        @functools.wraps(fn)
        def crossed(*args):
            return fn(*_settings_again(args))

    gpu = zero_gpu.gpu(crossed, duration)

    @functools.wraps(fn)
    def plain(*args):
        return gpu(*({"settings": a.to_dict()} if isinstance(a, GenerationSettings) else a for a in args))

    return plain


def _settings_again(args: tuple) -> list:
    return [
        GenerationSettings(**a["settings"]) if isinstance(a, dict) and a.keys() == {"settings"} else a for a in args
    ]


_generate = runs_models(_generate)
