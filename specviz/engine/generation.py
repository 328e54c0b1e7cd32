"""A run as an iterable of events, with its trace available at any moment."""

from __future__ import annotations

from typing import Callable, Iterator, Literal

from specviz.choices import SPECULATIVE
from specviz import run_stats
from specviz.costs.measure import for_pair
from specviz.engine import model_lock
from specviz.engine.plain import PlainDecoder
from specviz.lm import interrupt, resident
from specviz.lm.prompt import encode_prompt
from specviz.engine.speculative import SpeculativeDecoder
from specviz.events import Event, Trace
from specviz.grammar.formats import check_output
from specviz.lm.pair import ModelPair
from specviz.settings import GenerationSettings, check_prompt, prompt_text

Record = Literal["full", "minimal"]


class Generation:
    """Iterate to run: one RoundEvent per round (speculative) or PlainTokenEvent per token
    (plain), yielded as soon as it is known. `trace()` returns the trace so far.

    `history`: earlier outputs (token ids) of the same page session, for the suffix drafter's
    corpus; a caller without a session passes none, so no run sees another's outputs.

    Stops at EOS or max new tokens; before every round, and between the chunks of a prompt's
    prefill (`lm.interrupt`, the target's and the draft's), it also stops when `should_stop()`
    returns True ("cancelled") or `max_wall_s` seconds have passed ("time_limit").

    Each pass holds the process's models (`model_lock`), so a run still finishing a pass after
    its page request went away never overlaps the next run's; while it runs, the pair counts as
    in use and is not unloaded (`lm.resident`).

    The pair's cost model (measured when the pair was first used, see
    `costs.measure.for_pair`) goes into the trace: its one-token target pass is the
    plain-decoding speed every speedup in the summary is measured against.
    """

    def __init__(
        self,
        pair: ModelPair,
        prompt: str | list[dict],
        settings: GenerationSettings,
        *,
        should_stop: Callable[[], bool] | None = None,
        max_wall_s: float | None = None,
        record: Record = "full",
        history: list[list[int]] | None = None,
    ):
        if record not in ("full", "minimal"):
            raise ValueError(f"record must be 'full' or 'minimal' (got {record!r})")
        self.pair = pair
        self.settings = settings
        self._should_stop = should_stop
        self._max_wall_s = max_wall_s
        prompt = check_prompt(prompt)
        prompt_ids = encode_prompt(pair, prompt, settings)
        if settings.mode == SPECULATIVE:
            self._decoder = SpeculativeDecoder(pair, settings, prompt_ids, record=record, history=history)
        else:
            self._decoder = PlainDecoder(pair, settings, prompt_ids, record=record)
        self._cost = for_pair(pair)
        self._events: list[Event] = []
        self._started = False
        self._done = False
        meta = {
            "prompt_tokens": len(prompt_ids),
            "device": str(pair.device),
            "dtype": pair.precision,
            "runtime": pair.runtime,
            "target_loop": self._decoder.target.loop,
            "stop_ids": sorted(self._decoder.eos),
            "record": record,
            "cost_model": self._cost.to_dict(),
            # Each runtime's pass costs as measured on this machine, for the Theory tab's comparison.
            "runtime_costs": {
                rt: r["cost"] for rt, r in (pair.runtime_choice.rates if pair.runtime_choice else {}).items()
            },
        }
        if pair.cross_tokenizer and pair.vocab_map is not None:
            # How the pair drafts across tokenizers, so a replayed trace can say it too.
            meta["vocab"] = {
                k: v for k, v in pair.vocab_map.summary().items() if isinstance(v, (str, int, float, bool))
            }
        if settings.mode == SPECULATIVE:
            meta["drafter"] = self._decoder.drafter.name
        if self._decoder.grammar is not None:
            g = self._decoder.grammar
            meta["grammar"] = {"engine": "llguidance", "compile_ms": g.compile_ms, "vocab_size": g.vocab_size}
        self._prompt = prompt
        self._meta = meta

    def __iter__(self) -> Iterator[Event]:
        if self._started:
            raise RuntimeError("a Generation runs once: call specviz.engine.start again for another run")
        self._started = True
        return self._run()

    def _stop_reason(self) -> str:
        """Why the run must stop now ("cancelled", "time_limit"), or ""."""
        if self._should_stop is not None and self._should_stop():
            return "cancelled"
        d = self._decoder
        if self._max_wall_s is not None and d.t0 and d.elapsed() >= self._max_wall_s:
            return "time_limit"
        return ""

    def _pass(self, fn):
        """`fn()` holding the models, with the run's stop check inside its passes; None when
        stopped meanwhile (the stop reason set)."""
        try:
            with model_lock.models(self._stop_reason), interrupt.checked(self._stop_reason):
                return fn()
        except interrupt.Interrupted as e:
            self._decoder.stop_reason = e.reason
            return None

    def _run(self) -> Iterator[Event]:
        d = self._decoder
        try:
            with resident.using(self.pair):
                yield from self._rounds(d)
        finally:
            if not d.stop_reason:
                d.stop_reason = "cancelled"  # the caller stopped iterating
            d.finish_text()
            self._done = True

    def _rounds(self, d) -> Iterator[Event]:
        self._pass(d.begin)
        while not d.stop_reason:
            reason = self._stop_reason()
            if reason:
                d.stop_reason = reason
                break
            event = self._pass(d.step)
            if event is None:
                break
            self._events.append(event)
            if d.stop_reason:
                d.finish_text()  # before the last event goes out, so its text is final
            yield event

    @property
    def done(self) -> bool:
        return self._done

    def trace(self) -> Trace:
        """The run so far (summary up to date; stop_reason set once it has ended)."""
        d = self._decoder
        wall = self._events[-1].t_end_s if self._events else 0.0
        summary = d.tally.summary(
            wall_s=wall,
            load_s=self.pair.load_s,
            stop_reason=d.stop_reason if self._done else "",
            policy=d.length.name if self.settings.mode == SPECULATIVE else "",
            plain_ms_per_token=self._cost.target,
        )
        # Whole-run figures, once the run has ended: the page asks for the trace after every
        # round, and recomputing them over every round each time would grow as the square.
        if self.settings.mode == SPECULATIVE and self._done:
            summary.acceptance_by_position = run_stats.acceptance_by_position(self._events)
            summary.hindsight_k = run_stats.hindsight_k(self._events, self._meta["cost_model"])
        if d.grammar is not None:
            summary.grammar_ms = d.grammar.mask_ms / max(1, d.tally.new_tokens)
            if self._done:
                summary.format_check = check_output(d.grammar.format, d.detok.text, d.stop_reason)
        metrics = (
            {"speculative_decoding": run_stats.request_metrics(self._events)}
            if self.settings.mode == SPECULATIVE and self._done
            else {}
        )
        priced = d.length.priced() if self.settings.mode == SPECULATIVE else None
        return Trace(
            prompt=prompt_text(self._prompt),
            messages=list(self._prompt) if isinstance(self._prompt, list) else [],
            settings=self.settings.to_dict(),
            text=d.detok.text,
            token_ids=d.token_ids,
            events=list(self._events),
            summary=summary,
            mode=self.settings.mode,
            pair=self.pair.name,
            meta={**self._meta, **({"policy_costs": priced.to_dict()} if priced else {})},
            metrics=metrics,
        )


def start(pair: ModelPair, prompt: str | list[dict], settings: GenerationSettings, **options) -> Generation:
    """Prepare a run (prompt checked and encoded; the settings checked themselves when made); iterate the result to run it.
    `options` are Generation's: should_stop, max_wall_s, record, history."""
    return Generation(pair, prompt, settings, **options)


def run(pair: ModelPair, prompt: str | list[dict], settings: GenerationSettings, **kw) -> Trace:
    """Run to the end and return the whole trace."""
    generation = start(pair, prompt, settings, **kw)
    for _ in generation:
        pass
    return generation.trace()
