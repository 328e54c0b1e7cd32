"""Plain data that the engine yields and everything else draws from.

These dataclasses are the contract between the engine (which produces them) and the
viz / app / bench layers (which consume them). They hold numbers and strings only, and
round-trip through JSON unchanged, so a run can be saved as a trace, shared and replayed
with no model loaded.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Literal, Union

from specviz.errors import UserError

TRACE_VERSION = 1

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
class RoundEvent:
    """One draft/verify round."""

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


@dataclass
class Trace:
    """A whole run: what was asked, what came out and every event in between."""

    prompt: str
    settings: dict[str, Any]
    text: str
    token_ids: list[int]
    events: list[Event]
    summary: RunSummary
    mode: Literal["speculative", "plain"] = "speculative"
    pair: str = ""
    version: int = TRACE_VERSION
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        return _trace_from_dict(d)

    @classmethod
    def from_json(cls, s: str | bytes) -> "Trace":
        return _trace_from_dict(json.loads(s))


class TraceError(UserError):
    """A trace that cannot be read: the message says why, in words a user can act on."""


def _build(cls: type, d: Any, where: str) -> Any:
    if not isinstance(d, dict):
        raise TraceError(f"{where}: expected an object, got {type(d).__name__}")
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = required - d.keys()
    if missing:
        raise TraceError(f"{where}: missing {', '.join(sorted(missing))}")
    try:
        return cls(**{k: v for k, v in d.items() if k in names})
    except TypeError as e:
        raise TraceError(f"{where}: {e}") from None



def event_from_dict(d: Any, where: str = "event") -> Event:
    if not isinstance(d, dict):
        raise TraceError(f"{where}: expected an object")
    if d.get("type") == "plain":
        return _build(PlainTokenEvent, d, where)
    if d.get("type") != "round":
        raise TraceError(f"{where}: unknown event type {d.get('type')!r}")
    r = _build(RoundEvent, d, where)
    r.drafted = [_build(DraftToken, x, f"{where}.drafted") for x in _list(r.drafted, where)]
    r.positions = [_position(x, f"{where}.positions") for x in _list(r.positions, where)]
    if r.emitted is not None:
        r.emitted = _build(EmittedToken, r.emitted, f"{where}.emitted")
    return r


def _position(d: Any, where: str) -> PositionInfo:
    pos = _build(PositionInfo, d, where)
    pos.top = [_build(TopToken, x, f"{where}.top") for x in _list(pos.top, where)]
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
    return t
