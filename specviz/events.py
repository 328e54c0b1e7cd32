"""Plain data that the engine yields and everything else draws from.

These dataclasses are the contract between the engine (which produces them) and the
viz / app / bench layers (which consume them). They hold numbers and strings only, and
round-trip through JSON unchanged, so a run can be saved as a trace, shared and replayed
with no model loaded.
"""

from __future__ import annotations

import functools
import json
import math
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from typing import Any, Literal, Union

from specviz.errors import UserError
from specviz.settings import FIELDS, GenerationSettings, check_prompt, from_request
from specviz.choices import COST_AWARE, FIXED, PLAIN, SPECULATIVE

TRACE_VERSION = 1
# The largest trace `load_trace` reads by default: a 1024-token run with every position
# recorded is a few MB, and an upload must not make the server parse hundreds.
MAX_TRACE_BYTES = 20 << 20

# What happened to one drafted token during verification.
Decision = Literal["accepted", "rejected", "unchecked"]
# How the token that closes a round was chosen: from the residual norm(max(0, p - q)) after
# a rejection, or from p_{k+1} after all k drafts were accepted.
EmittedKind = Literal["resampled", "bonus"]


@dataclass
class TopToken:
    """One candidate at a position, with its target (p) and draft (q) probability."""

    id: int
    text: str
    p: float
    q: float


@dataclass
class PositionInfo:
    """What the target and the draft thought at one verified position of a round."""

    top: list[TopToken]  # union of the top tokens of p and q, sorted by p
    overlap: float  # beta = sum_x min(p(x), q(x)): the chance this position is accepted
    top2_logit_gap: float  # target's logit gap between its two best tokens (near-ties flip)


@dataclass
class DraftToken:
    """A token the drafter proposed and the target then judged."""

    id: int
    text: str
    p: float  # target probability of this token at its position
    q: float  # probability the drafter sampled it with (1.0 for point-mass drafters)
    u: float | None  # the uniform draw compared with p/q; None when greedy or unchecked
    decision: Decision


@dataclass
class EmittedToken:
    """The token the target contributes at the end of a round."""

    id: int
    text: str
    p: float  # target probability of this token
    kind: EmittedKind


@dataclass
class TreeNode:
    """One drafted node of a token tree. A chain is the tree whose nodes each have one child."""

    parent: int  # index of the parent node in the round's tree; -1: a child of the root (the last output token)
    token: int
    text: str
    depth: int  # 1 for children of the root
    q: float  # probability the drafter gave this token at its parent
    p: float | None  # target probability of the token at its parent, where the target checked it
    decision: Decision


@dataclass
class CandidateSource:
    """Where a draft-free round's candidates came from, for the Round inspector."""

    method: str  # the drafter: choices.SUFFIX or LOOKAHEAD
    # suffix: the context's last tokens that matched earlier text, how many times they occur
    # there, and per tree node how many of those occurrences continued through it.
    matched: list[str] = field(default_factory=list)
    occurrences: int = 0
    counts: list[int] = field(default_factory=list)
    # lookahead: the Jacobi window fed with this pass, level by level (level 0 first, its
    # first column the root), the n-grams the pass produced from it, and per tree node where
    # the n-gram it belongs to was found ("window" or "context").
    window: list[list[str]] = field(default_factory=list)
    ngrams: list[list[str]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    window_on: bool = False  # lookahead: whether the window rode in this pass
    ride: int = 0  # nodes that rode in the pass without being candidates (the window's)
    note: str = ""  # why nothing was speculated this round, where nothing was


@dataclass
class AlignedToken:
    """A cross-tokenizer round: one token the draft proposed in its own vocabulary, and the
    target's candidates (indices into the round's `drafted`) its text became."""

    id: int
    text: str
    candidates: list[int]


@dataclass
class RoundEvent:
    """One draft/verify round. A tree round also lists every drafted node in `tree`; its
    `drafted` are the nodes the target checked along the path it took, in order, so the
    token stream draws chains and trees alike."""

    index: int
    k: int  # draft length actually used this round
    drafted: list[DraftToken]
    emitted: EmittedToken | None  # None only when the run stopped on an accepted EOS/limit
    positions: list[PositionInfo]  # one per drafted token, plus the bonus position when reached
    draft_ms: float
    verify_ms: float
    t_end_s: float  # seconds since the run started when this round's tokens were known
    new_tokens: int  # total new tokens after this round
    type: Literal["round"] = "round"
    tree: list[TreeNode] = field(default_factory=list)  # empty for a chain round
    alignment: list[AlignedToken] = field(default_factory=list)  # a draft with another tokenizer: its own tokens
    source: CandidateSource | None = None  # a draft-free tree drafter's round: where its candidates came from

    @property
    def accepted(self) -> int:
        return sum(d.decision == "accepted" for d in self.drafted)

    @property
    def gained(self) -> int:
        """Tokens this round added to the output."""
        return self.accepted + (self.emitted is not None)


@dataclass
class PlainTokenEvent:
    """One token of plain (target-only) decoding, for comparison."""

    index: int
    id: int
    text: str
    p: float
    ms: float
    t_end_s: float
    type: Literal["plain"] = "plain"


Event = Union[RoundEvent, PlainTokenEvent]


@dataclass
class RunSummary:
    new_tokens: int = 0
    rounds: int = 0
    target_passes: int = 0
    draft_passes: int = 0
    drafted: int = 0  # drafted tokens that were tested against the target
    accepted: int = 0
    acceptance_rate: float = 0.0  # accepted / drafted
    mean_overlap: float = 0.0  # mean beta over tested positions (the measured alpha)
    tokens_per_round: float = 0.0
    wall_s: float = 0.0  # generation only, model loading excluded
    tokens_per_s: float = 0.0
    target_ms: float = 0.0  # mean ms of one target forward pass (T)
    draft_ms: float = 0.0  # mean ms of one drafted token (D)
    load_s: float = 0.0
    stop_reason: str = ""  # "eos", "max_new_tokens", "cancelled", "time_limit"
    policy: str = ""  # the draft-length policy of a speculative run: fixed, heuristic or cost-aware
    # Plain decoding's cost of a token: the one-token target pass of the pair's cost model,
    # measured when the pair loaded, so a trace's speedup does not depend on what else ran.
    plain_ms_per_token: float = 0.0
    speedup_vs_plain: float = 0.0  # tokens_per_s over 1000 / plain_ms_per_token (0 when unknown)
    # Filled when a speculative run has ended (empty in the traces streamed while it runs):
    acceptance_by_position: list[float] = field(default_factory=list)  # accepted / reached at each draft position
    hindsight_k: list[int] = field(default_factory=list)  # per round: the best k in hindsight (`specviz.acceptance`)


@dataclass
class Trace:
    """A whole run: what was asked, what came out and every event in between."""

    prompt: str
    settings: dict[str, Any]
    text: str
    token_ids: list[int]
    events: list[Event]
    summary: RunSummary
    mode: Literal[SPECULATIVE, PLAIN] = SPECULATIVE  # the MODES names (checked when a trace is read)
    pair: str = ""
    version: int = TRACE_VERSION
    meta: dict[str, Any] = field(default_factory=dict)
    # A finished speculative run's counts under vLLM's per-request names
    # (`acceptance.request_metrics`), as {"speculative_decoding": {...}}; empty otherwise.
    metrics: dict[str, Any] = field(default_factory=dict)
    # A conversation's messages ({"role", "content"}) where the run was given one; `prompt`
    # is then its last user message.
    messages: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        return _trace_from_dict(d)

    @classmethod
    def from_json(cls, s: str | bytes) -> "Trace":
        return load_trace(s, max_bytes=None)


class TraceError(UserError):
    """A trace that cannot be read: the message says why, in words a user can act on."""


def load_trace(data: str | bytes, *, max_bytes: int | None = MAX_TRACE_BYTES) -> Trace:
    """A Trace from untrusted text or bytes (an upload), or a TraceError saying what is wrong.

    Nothing else escapes: not JSON, not UTF-8, too large, nested too deeply, a field of the
    wrong type or a non-finite number all become one TraceError. A trace that loads holds
    only the types its dataclasses declare, so everything that draws it can trust them.
    """
    size = len(data) if isinstance(data, (bytes, bytearray)) else len(data.encode("utf-8", "surrogatepass"))
    if max_bytes is not None and size > max_bytes:
        raise TraceError(f"the trace is {size / 2**20:.1f} MB; traces up to {max_bytes / 2**20:.0f} MB can be read")
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise TraceError("the file is not UTF-8 text: a trace is a JSON file saved by specviz") from None
    try:
        d = json.loads(data)
        # JSON may spell lone surrogates (\ud800), which no page or file can encode later.
        json.dumps(d, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise TraceError("not a specviz trace: the JSON is nested too deeply") from None
    except UnicodeEncodeError:
        raise TraceError("not a specviz trace: it holds text that is not valid Unicode (a lone surrogate)") from None
    except ValueError as e:  # JSONDecodeError, and numbers too long to convert
        raise TraceError(f"not JSON ({e}): a trace is a JSON file saved by specviz") from None
    return _trace_from_dict(d)


def _build(cls: type, d: Any, where: str) -> Any:
    if not isinstance(d, dict):
        raise TraceError(f"{where}: expected an object, got {type(d).__name__}")
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = required - d.keys()
    if missing:
        raise TraceError(f"{where}: missing {', '.join(sorted(missing))}")
    hints = _hints(cls)
    for name in sorted(names & d.keys()):
        if not _conforms(d[name], hints[name]):
            raise TraceError(f"{where}.{name}: expected {_describe(hints[name])}, got {_kind(d[name])}")
    return cls(**{k: v for k, v in d.items() if k in names})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON value has the declared type. A nested dataclass only needs to be an
    object here: its own `_build` checks its fields."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin in (Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict or is_dataclass(hint):
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    raise TypeError(f"no JSON check for {hint!r}")  # a new field type: teach _conforms about it


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is list:
        return f"a list of {_describe(args[0])}"
    if origin is dict or is_dataclass(hint):
        return "an object"
    return {type(None): "null", bool: "true or false", int: "a whole number", float: "a finite number", str: "a string"}[hint]


def _kind(value: Any) -> str:
    """What a JSON value is, for messages (never the value itself: it may be huge or hostile)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)



def event_from_dict(d: Any, where: str = "event") -> Event:
    if not isinstance(d, dict):
        raise TraceError(f"{where}: expected an object")
    if d.get("type") == "plain":
        return _build(PlainTokenEvent, d, where)
    if d.get("type") != "round":
        raise TraceError(f"{where}.type: expected \"round\" or \"plain\", got {_kind(d.get('type'))}")
    r = _build(RoundEvent, d, where)
    r.drafted = [_build(DraftToken, x, f"{where}.drafted[{j}]") for j, x in enumerate(_list(r.drafted, where))]
    r.positions = [_position(x, f"{where}.positions[{j}]") for j, x in enumerate(_list(r.positions, where))]
    r.tree = [_build(TreeNode, x, f"{where}.tree[{j}]") for j, x in enumerate(_list(r.tree, where))]
    r.alignment = [_build(AlignedToken, x, f"{where}.alignment[{j}]") for j, x in enumerate(_list(r.alignment, where))]
    if r.emitted is not None:
        r.emitted = _build(EmittedToken, r.emitted, f"{where}.emitted")
    if r.source is not None:
        r.source = _build(CandidateSource, r.source, f"{where}.source")
    return r


def _position(d: Any, where: str) -> PositionInfo:
    pos = _build(PositionInfo, d, where)
    pos.top = [_build(TopToken, x, f"{where}.top[{j}]") for j, x in enumerate(_list(pos.top, where))]
    return pos


def _list(x: Any, where: str) -> list:
    if not isinstance(x, list):
        raise TraceError(f"{where}: expected a list")
    return x


def _trace_from_dict(d: Any) -> Trace:
    t = _build(Trace, d, "trace")
    if t.version != TRACE_VERSION:
        raise TraceError(f"trace: version {t.version!r} is not supported (expected {TRACE_VERSION})")
    t.events = [event_from_dict(e, f"events[{i}]") for i, e in enumerate(_list(t.events, "trace"))]
    t.summary = _build(RunSummary, t.summary, "trace.summary")
    _check_settings(t.settings)
    if t.messages:
        try:
            t.messages = check_prompt(t.messages)
        except UserError as e:
            raise TraceError(f"trace.messages: {e}") from None
    return t


def _check_settings(settings: dict[str, Any]) -> None:
    """A trace's settings are a GenerationSettings' fields, within their limits, so the page
    can rerun or compare with them as they are. A trace recorded before the draft-length
    policy existed says `adaptive` instead: it is read as `settings.from_request` reads it."""
    if "adaptive" in settings and "policy" not in settings:
        adaptive = settings.pop("adaptive")
        if not isinstance(adaptive, bool):
            raise TraceError(f"trace.settings.adaptive: expected true or false, got {_kind(adaptive)}")
        settings["policy"] = COST_AWARE if adaptive else FIXED
    known = set(FIELDS)
    if not settings.keys() <= known:
        raise TraceError(f"trace.settings: {len(settings.keys() - known)} unknown names (known: {', '.join(sorted(known))})")
    hints = _hints(GenerationSettings)
    for name in sorted(settings):
        if not _conforms(settings[name], hints[name]):
            raise TraceError(f"trace.settings.{name}: expected {_describe(hints[name])}, got {_kind(settings[name])}")
    try:
        from_request(settings)
    except UserError as e:
        raise TraceError(f"trace.settings: {e}") from None
