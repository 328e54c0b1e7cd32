"""An engine's speculative metrics, read from what it prints, as counts a specviz run also has.

Read (`read`), each with the names its engine uses:

- Prometheus text from vLLM's `/metrics` (`vllm:spec_decode_num_drafts`, `..._num_draft_tokens`,
  `..._num_accepted_tokens`, `..._num_accepted_tokens_per_pos` with a 0-based `position`
  label; counters carry Prometheus' `_total` suffix) or llama-server's `/metrics` (the same
  names under `llamacpp:`). One set of counts per `model_name`; series of several engines of
  one model add up. A text holding two scrapes (before and after) gives their difference, and
  a counter that went down restarted in between: its later value is what it counted since.
- vLLM's per-request JSON (`metrics.speculative_decoding`: `num_spec_steps`, `num_draft_tokens`,
  `num_accepted_draft_tokens`, `acceptance_histogram`, vLLM PR #48915), which a specviz trace's
  `metrics` block repeats under the same names.
- SGLang's `meta_info` (`spec_verify_ct`, `completion_tokens`, and `spec_accept_rate` where
  given; SGLang PR #11144): every verify step yields its accepted drafts plus one token, so
  accepted = completion_tokens - spec_verify_ct.
- llama-server's `/completion` response (`timings.draft_n`, `timings.draft_n_accepted`,
  `timings.predicted_n`): every target pass yields one token of its own, so the passes are
  predicted_n - draft_n_accepted.

Several JSON objects (a list, JSON lines or a stream of `data:` lines) add up. Anything else
is a `MetricsError` of one line that names what is missing. Sizes are checked against
`specviz.limits` before the work that grows with them, and reading is linear in the payload.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from specviz import limits
from specviz.run_stats import PositionStats
from specviz.errors import UserError, shown


class MetricsError(UserError):
    """A payload that cannot be read as an engine's speculative metrics."""


@dataclass
class Counts:
    engine: str  # "vLLM", "SGLang", "llama.cpp" or "specviz"
    source: str  # what was read, in words
    model: str = ""
    steps: int | None = None  # verify passes that checked drafts (vLLM's num_drafts)
    draft_tokens: int | None = None  # drafted tokens, judged or not
    accepted: int = 0  # accepted drafted tokens
    per_position: list[int] | None = None  # accepted at draft position 1, 2, ...
    histogram: list[int] | None = None  # steps by drafts accepted, 0..k
    passes: int | None = None  # every target pass, drafting or not (llama.cpp's responses)
    tokens: int | None = None  # tokens generated
    notes: list[str] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_length_with_bonus(self) -> float | None:
        """Tokens per verify step: accepted drafts plus the target's own (vLLM's and
        llama.cpp's "mean acceptance length")."""
        if self.steps:
            return 1 + self.accepted / self.steps
        if self.passes and self.tokens is not None:
            return self.tokens / self.passes  # per target pass, drafting or not
        return None

    @property
    def mean_length_without_bonus(self) -> float | None:
        with_bonus = self.mean_length_with_bonus
        return None if with_bonus is None else with_bonus - 1

    @property
    def k(self) -> float | None:
        """Drafted tokens per step: the engine's draft length, or its mean."""
        steps = self.steps or self.passes
        return self.draft_tokens / steps if self.draft_tokens is not None and steps else None

    @property
    def unconditional(self) -> list[float] | None:
        """Accepted at position i / steps: the rate vLLM and llama.cpp log by position."""
        ps = self.position_stats()
        return None if ps is None else ps.unconditional.tolist()

    @property
    def conditional(self) -> list[float] | None:
        """Accepted at i / accepted at i - 1 (steps at i = 1): where every step drafts the
        same k, as vLLM's and llama.cpp's do, a draft at i is judged only after i - 1 was
        accepted, so this is the rate once the draft got that far."""
        ps = self.position_stats()
        return None if ps is None else ps.conditional.tolist()

    def position_stats(self) -> PositionStats | None:
        """The counts by position as a run's (`run_stats.PositionStats`): every step drafts k,
        so position i is drafted in every step and reached where i - 1 was accepted."""
        if self.per_position is None or not self.steps:
            return None
        accepted = np.array(self.per_position, int)
        reached = np.array([self.steps] + self.per_position[:-1], int)
        return PositionStats(
            np.full(len(accepted), self.steps),
            reached,
            accepted,
            float(accepted.sum() / reached.sum()) if reached.sum() else 0.0,
        )

    def to_dict(self) -> dict:
        """The counts, then what follows from them, then the notes."""
        counts = {k: v for k, v in asdict(self).items() if k != "notes"}
        return {
            **counts,
            "acceptance_rate": self.acceptance_rate,
            "mean_acceptance_length": self.mean_length_with_bonus,
            "mean_accepted_drafts": self.mean_length_without_bonus,
            "k": self.k,
            "unconditional_by_position": self.unconditional,
            "conditional_by_position": self.conditional,
            "notes": self.notes,
        }


def read(text: str | bytes) -> list[Counts]:
    """The speculative counts in `text`, one per model it reports on."""
    limits.METRICS_BYTES.check(len(text) if isinstance(text, bytes) else _utf8_size(text))
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise MetricsError(
                "the file is not UTF-8 text: paste Prometheus text or an engine's JSON response"
            ) from None
    text = text.strip()
    if not text:
        raise MetricsError("nothing to read: paste Prometheus text from /metrics or an engine's JSON response")
    objects = _json_objects(text)
    if objects is not None:
        return [_from_json(objects)]
    return _from_prometheus(text)


def _utf8_size(text: str) -> int:
    """Bytes `text` takes as UTF-8, or its length where that alone is over the limit (a
    character is at least a byte): never a copy of a payload too large to read."""
    if text.isascii() or len(text) > limits.METRICS_BYTES.value:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


# --- JSON ---------------------------------------------------------------------------------


def _json_objects(text: str) -> list | None:
    """The JSON values in `text` (one document, JSON lines or `data:` lines), or None when
    it is not JSON at all."""
    if text[0] not in "[{" and not text.startswith("data:"):
        return None
    try:
        value = _loads(text)
        values = value if isinstance(value, list) else [value]
    except MetricsError:
        raise
    except ValueError:
        values = []
        for line in text.splitlines():
            line = line.strip().removeprefix("data:").strip()
            if not line or line == "[DONE]":
                continue
            limits.METRICS_OBJECTS.check(len(values) + 1)
            try:
                values.append(_loads(line))
            except MetricsError:
                raise
            except ValueError as e:
                raise MetricsError(f"not JSON ({e}): paste one JSON response, JSON lines, or Prometheus text") from None
    limits.METRICS_OBJECTS.check(len(values))
    return values


def _loads(text: str):
    try:
        return json.loads(text)
    except RecursionError:
        raise MetricsError("the JSON nests too deeply to be an engine's response") from None


def _from_json(objects: list) -> Counts:
    found = [c for c in (_one_json(o) for o in objects) if c is not None]
    if not found:
        raise MetricsError(
            "no speculative metrics in this JSON: expected vLLM's metrics.speculative_decoding, "
            "SGLang's meta_info.spec_verify_ct, or llama.cpp's timings.draft_n"
        )
    engines = {c.engine for c in found}
    if len(engines) > 1:
        raise MetricsError(f"responses from several engines at once ({', '.join(sorted(engines))}): read one at a time")
    return _sum(found)


def _one_json(o) -> Counts | None:
    if not isinstance(o, dict):
        return None
    if "data" in o and isinstance(o["data"], dict):  # a captured stream chunk, wrapped
        o = o["data"]
    spec = (o.get("metrics") or {}).get("speculative_decoding") if isinstance(o.get("metrics"), dict) else None
    if spec is None and "num_spec_steps" in o:
        spec = o
    if spec is not None:
        engine = "specviz" if "events" in o else "vLLM"
        return _vllm_request(spec, engine, str(o.get("model") or o.get("pair") or ""))
    meta = o.get("meta_info") if isinstance(o.get("meta_info"), dict) else o if "spec_verify_ct" in o else None
    if meta is not None and "spec_verify_ct" in meta:
        return _sglang(meta)
    timings = o.get("timings")
    if isinstance(timings, dict) and ("draft_n" in timings or "draft_n_accepted" in timings):
        return _llamacpp_response(timings, str(o.get("model") or ""))
    return None


def _int(d: dict, key: str, where: str) -> int:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf") or v != int(v):
        raise MetricsError(f"{where}: {key} is missing or not a count")
    return int(v)


def _vllm_request(spec: dict, engine: str, model: str) -> Counts:
    if not isinstance(spec, dict):
        raise MetricsError("metrics.speculative_decoding is not an object")
    where = "metrics.speculative_decoding"
    steps, drafted, accepted = (
        _int(spec, k, where) for k in ("num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens")
    )
    hist = spec.get("acceptance_histogram")
    histogram = per_position = None
    if isinstance(hist, list):
        limits.METRICS_POSITIONS.check(len(hist) - 1, f"{where}: acceptance_histogram's length less one")
    if isinstance(hist, list) and hist and all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in hist):
        histogram = hist
        # Steps that accepted at least i drafts accepted one at position i: sums from the end.
        at_least = np.cumsum(np.array(hist[::-1], dtype=object))[::-1]
        per_position = [int(n) for n in at_least[1:]]
        if sum(hist) != steps:
            raise MetricsError(f"{where}: acceptance_histogram counts {sum(hist)} steps, num_spec_steps says {steps}")
    return Counts(
        engine,
        "per-request metrics JSON",
        model,
        steps=steps,
        draft_tokens=drafted,
        accepted=accepted,
        per_position=per_position,
        histogram=histogram,
    )


def _sglang(meta: dict) -> Counts:
    steps = _int(meta, "spec_verify_ct", "meta_info")
    tokens = _int(meta, "completion_tokens", "meta_info")
    accepted = max(0, tokens - steps)
    rate = meta.get("spec_accept_rate")
    drafted = round(accepted / rate) if isinstance(rate, (int, float)) and rate > 0 else None
    notes = (
        []
        if drafted is not None
        else ["SGLang's meta_info gives no drafted-token count (spec_accept_rate): the acceptance rate is left out"]
    )
    return Counts(
        "SGLang",
        "meta_info",
        str(meta.get("model") or ""),
        steps=steps,
        draft_tokens=drafted,
        accepted=accepted,
        tokens=tokens,
        notes=notes,
    )


def _llamacpp_response(t: dict, model: str) -> Counts:
    drafted = _int(t, "draft_n", "timings")
    accepted = _int(t, "draft_n_accepted", "timings")
    tokens = _int(t, "predicted_n", "timings") if "predicted_n" in t else None
    passes = tokens - accepted if tokens is not None else None
    notes = [
        "llama.cpp's response counts drafted and accepted tokens, not the steps that drafted: "
        "lengths are per target pass, drafting or not, and the per-position rates come from /metrics"
    ]
    return Counts(
        "llama.cpp",
        "/completion response timings",
        model,
        draft_tokens=drafted,
        accepted=accepted,
        passes=passes,
        tokens=tokens,
        notes=notes,
    )


def _sum(found: list[Counts]) -> Counts:
    if len(found) == 1:
        return found[0]

    def total(name):
        values = [getattr(c, name) for c in found]
        return None if any(v is None for v in values) else sum(values)

    first = found[0]
    per_pos = None
    if all(c.per_position is not None for c in found):
        n = max(len(c.per_position) for c in found)
        per_pos = [sum(c.per_position[i] for c in found if i < len(c.per_position)) for i in range(n)]
    return Counts(
        first.engine,
        f"{len(found)} {first.source}s",
        first.model,
        steps=total("steps"),
        draft_tokens=total("draft_tokens"),
        accepted=sum(c.accepted for c in found),
        per_position=per_pos,
        passes=total("passes"),
        tokens=total("tokens"),
        notes=list(dict.fromkeys(n for c in found for n in c.notes)),
    )


# --- Prometheus text ----------------------------------------------------------------------

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)(?:\s+\d+)?$")
# One label, matched where the last one ended (a scan from every offset would be quadratic).
_LABEL = re.compile(r'\s*(\w+)\s*=\s*"((?:[^"\\]|\\.)*+)"\s*,?')
_PREFIXES = {"vllm:": "vLLM", "llamacpp:": "llama.cpp"}
_NAMES = (
    "spec_decode_num_drafts",
    "spec_decode_num_draft_tokens",
    "spec_decode_num_accepted_tokens",
    "spec_decode_num_accepted_tokens_per_pos",
)


def _from_prometheus(text: str) -> list[Counts]:
    series: dict[tuple, list[float]] = {}  # (engine, model, name, position, other labels) -> values in order
    seen_any = False
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        limits.METRICS_LINE.check(len(line), f"line {number}")
        m = _SAMPLE.match(line)
        try:
            value = float(m["value"]) if m else None
        except ValueError:
            value = None
        if value is None:
            continue
        seen_any = True
        name = m["name"]
        prefix = next((p for p in _PREFIXES if name.startswith(p)), None)
        if prefix is None:
            continue
        base = name[len(prefix) :].removesuffix("_total")
        if base not in _NAMES:
            continue
        if not 0 <= value < float("inf"):
            raise MetricsError(f"line {number}: a counter must be a finite number, 0 or more (got {shown(m['value'])})")
        labels = _labels(m["labels"] or "")
        model = labels.pop("model_name", labels.pop("model", ""))
        position = labels.pop("position", None)
        if position is not None and position.isascii() and position.isdigit():
            limits.METRICS_POSITIONS.check(int(position), f"line {number}: the position label")
        key = (_PREFIXES[prefix], model, base, position, tuple(sorted(labels.items())))
        series.setdefault(key, []).append(value)
    if not series:
        what = "no speculative decoding counters" if seen_any else "neither JSON nor Prometheus text"
        raise MetricsError(
            f"{what}: expected vllm:spec_decode_num_drafts (vLLM) or llamacpp:spec_decode_num_drafts "
            "(llama-server --metrics)"
        )
    out = []
    for engine, model in sorted({(k[0], k[1]) for k in series}):
        out.append(_model_counts(engine, model, {k: v for k, v in series.items() if k[0] == engine and k[1] == model}))
    return out


def _labels(text: str) -> dict[str, str]:
    """`a="1",b="x"` as a dict; reading stops at the first part that is not a label."""
    out, at = {}, 0
    while at < len(text):
        m = _LABEL.match(text, at)
        if m is None:
            break
        out[m[1]] = m[2]
        at = m.end()
    return out


def _model_counts(engine: str, model: str, series: dict) -> Counts:
    notes: list[str] = []

    def counted(values: list[float]) -> float:
        if len(values) == 1:
            return values[0]
        if values[-1] < values[0]:
            notes.append(
                "a counter went down between the two scrapes (the engine restarted): its later value is "
                "what it counted since"
            )
            return values[-1]
        return values[-1] - values[0]

    def total(base: str) -> int | None:
        got = [counted(v) for k, v in series.items() if k[2] == base]
        return int(round(sum(got))) if got else None

    steps, drafted, accepted = total(_NAMES[0]), total(_NAMES[1]), total(_NAMES[2])
    who = f" for {model}" if model else ""
    for name, value in zip(_NAMES[:3], (steps, drafted, accepted)):
        if value is None:
            raise MetricsError(f"{engine}{who}: no {name} series (is speculative decoding on?)")
    if any(len(v) > 2 for v in series.values()):
        notes.append("more than two scrapes: the first and the last are compared")
    by_pos: dict[int, float] = {}
    for k, v in series.items():
        if k[2] == _NAMES[3] and k[3] is not None and k[3].isascii() and k[3].isdigit():
            by_pos[int(k[3])] = by_pos.get(int(k[3]), 0.0) + counted(v)
    per_position = [int(round(by_pos.get(i, 0.0))) for i in range(max(by_pos) + 1)] if by_pos else None
    if per_position is None:
        notes.append(f"no {_NAMES[3]} series: acceptance by position is left out")
    if any(len(v) > 1 for v in series.values()):
        notes.insert(0, "two scrapes: the counts between them")
    return Counts(
        engine,
        "Prometheus /metrics",
        model,
        steps=steps,
        draft_tokens=drafted,
        accepted=accepted,
        per_position=per_position,
        notes=list(dict.fromkeys(notes)),
    )
