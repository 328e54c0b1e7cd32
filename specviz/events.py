"""Plain data that the engine yields and everything else draws from.

These dataclasses are the contract between the engine (which produces them) and the
viz / app / bench layers (which consume them). They hold numbers and strings only, and
round-trip through JSON unchanged, so a run can be saved as a trace, shared and replayed
with no model loaded.

They are also the trace's schema: pydantic reads their annotations, bounds included, to
check a trace from outside (`load_trace`) and to write its JSON Schema (`schema_text`,
docs/trace.schema.json). The engine builds them directly and unchecked.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Callable, Literal, TypeVar, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    with_config,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from specviz.choices import PLAIN, SPECULATIVE
from specviz.errors import UserError
from specviz.cost_model import older_shape
from specviz.settings import FIELDS, MAX_NEW_TOKENS_CAP, SPECS, adaptive_as_policy, check_prompt, from_request

TRACE_VERSION = 1

# What a trace may hold. A trace from outside is checked against these before anything
# draws it, so no view does work that grows past them.
MAX_TRACE_BYTES = 32 << 20  # the largest run the settings allow fits (tests/test_trace_limits.py builds one)
MAX_JSON_CONTAINERS = 1 << 20  # objects and lists: a file of empty ones costs parsing memory, not bytes
# Values and members (counted as commas): each becomes a Python object of 24-100 bytes, so a file
# of short ones costs a dozen times its bytes; the largest run the settings allow has 1.6 million.
MAX_JSON_VALUES = 2_500_000
MAX_EVENTS = MAX_NEW_TOKENS_CAP  # every round adds a token
MAX_TREE_NODES = 128  # per round: the largest drafter tree is lookahead's G x (N - 1) = 16 x 7
MAX_TOP_TOKENS = 32  # per position: the union of p's and q's top tokens
MAX_TOKEN_CHARS = 256  # a token's text, and short names
MAX_TEXT_CHARS = 1 << 18  # a prompt, a message or the output text
MAX_NOTE_CHARS = 2048  # a drafter's words on how it sized a round (a few hundred characters)
MAX_MESSAGES = 256
MAX_RUN_S = 86_400.0  # a day: the bound of every time in a trace

TokenId = Annotated[int, Strict(), Field(ge=0, lt=2**31)]
Count = Annotated[int, Strict(), Field(ge=0, le=2**31)]
NodeCount = Annotated[int, Strict(), Field(ge=0, le=MAX_TREE_NODES)]
Probability = Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)]
Ratio = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
Seconds = Annotated[float, Strict(), Field(ge=0, le=MAX_RUN_S, allow_inf_nan=False)]
Millis = Annotated[float, Strict(), Field(ge=0, le=MAX_RUN_S * 1000, allow_inf_nan=False)]
Short = Annotated[str, Strict(), Field(max_length=MAX_TOKEN_CHARS)]
Long = Annotated[str, Strict(), Field(max_length=MAX_TEXT_CHARS)]
_T = TypeVar("_T")
PerNode = Annotated[list[_T], Field(max_length=MAX_TREE_NODES)]  # one per node of a round's tree, at most
Shorts = PerNode[Short]
EventIndex = Annotated[int, Strict(), Field(ge=0, lt=MAX_EVENTS)]

# What happened to one drafted token during verification.
Decision = Literal["accepted", "rejected", "unchecked"]
# Why the cost-aware policy drafted nothing in a round ("" where it drafted): no draft length
# pays even if every draft were accepted, none pays at the acceptance seen so far, its drafting
# rounds gave fewer tokens per ms than its plain ones, or the draft's read of what it skipped would
# cost more than the rest of the run could repay; CHECK marks a round that drafts only to ask
# again. viz puts them in words.
NO_DRAFT_PAYS, LOW_ACCEPTANCE, DRAFTING_LOST = "no-draft-pays", "low-acceptance", "drafting-lost"
CATCH_UP, CHECK = "catch-up", "check"
POLICY_NOTES = ("", NO_DRAFT_PAYS, LOW_ACCEPTANCE, DRAFTING_LOST, CATCH_UP, CHECK)
# How the token that closes a round was chosen: from the residual norm(max(0, p - q)) after
# a rejection, or from p_{k+1} after all k drafts were accepted.
EmittedKind = Literal["resampled", "bonus"]


@dataclass
class TopToken:
    """One candidate at a position, with its target (p) and draft (q) probability."""

    id: TokenId
    text: Short
    p: Probability
    q: Probability


@dataclass
class PositionInfo:
    """What the target and the draft thought at one verified position of a round."""

    top: Annotated[list[TopToken], Field(max_length=MAX_TOP_TOKENS)]  # union of the top tokens of p and q, by p
    overlap: Ratio  # beta = sum_x min(p(x), q(x)): the chance this position is accepted
    top2_logit_gap: Ratio  # target's logit gap between its two best tokens (near-ties flip)
    # Under an output format: how many tokens the grammar allowed here, and p's mass on them
    # before the mask (p and q above are the masked ones).
    allowed: Count | None = None
    kept: Probability | None = None


@dataclass
class DraftToken:
    """A token the drafter proposed and the target then judged."""

    id: TokenId
    text: Short
    p: Probability  # target probability of this token at its position
    q: Probability  # probability the drafter sampled it with (1.0 for point-mass drafters)
    u: Probability | None  # the uniform draw compared with p/q; None when greedy or unchecked
    decision: Decision
    forced: Annotated[bool, Strict()] = False  # the output format forced it: a point mass, not drafted


@dataclass
class EmittedToken:
    """The token the target contributes at the end of a round."""

    id: TokenId
    text: Short
    p: Probability  # target probability of this token
    kind: EmittedKind


@dataclass
class TreeNode:
    """One drafted node of a token tree. A chain is the tree whose nodes each have one child."""

    # index of the parent node in the round's tree; -1: a child of the root (the last output token)
    parent: Annotated[int, Strict(), Field(ge=-1, lt=MAX_TREE_NODES)]
    token: TokenId
    text: Short
    depth: Annotated[int, Strict(), Field(ge=1, le=MAX_TREE_NODES)]  # 1 for children of the root
    q: Probability  # probability the drafter gave this token at its parent
    p: Probability | None  # target probability of the token at its parent, where the target checked it
    decision: Decision
    forced: Annotated[bool, Strict()] = False  # the output format forced it


def _tree_shape(tree: list[TreeNode]) -> list[TreeNode]:
    """Each node hangs under the root or an earlier node, one level below it, as the engine
    records them (the views draw and mask the tree from these)."""
    for i, node in enumerate(tree):
        if not -1 <= node.parent < i:
            raise PydanticCustomError("tree", f"node {i} has parent {node.parent}: a parent is -1 or an earlier node")
        depth = 1 if node.parent == -1 else tree[node.parent].depth + 1
        if node.depth != depth:
            raise PydanticCustomError("tree", f"node {i} is at depth {node.depth}; under its parent it is at {depth}")
    return tree


@dataclass
class CandidateSource:
    """Where a draft-free round's candidates came from (or that a draft head proposed them), for
    the Round inspector."""

    method: Short  # the drafter: choices.SUFFIX, LOOKAHEAD or HEAD
    # suffix: the context's last tokens that matched earlier text, how many times they occur
    # there, and per tree node how many of those occurrences continued through it.
    matched: Shorts = field(default_factory=list)
    occurrences: Count = 0
    counts: PerNode[Count] = field(default_factory=list)
    # lookahead: the Jacobi window fed with this pass, level by level (level 0 first, its
    # first column the root), the n-grams the pass produced from it, and per tree node where
    # the n-gram it belongs to was found ("window" or "context").
    window: PerNode[Shorts] = field(default_factory=list)
    ngrams: PerNode[Shorts] = field(default_factory=list)
    origins: Shorts = field(default_factory=list)
    window_on: Annotated[bool, Strict()] = False  # lookahead: whether the window rode in this pass
    ride: NodeCount = 0  # nodes that rode in the pass without being candidates (the window's)
    # how the round was sized, or why nothing was speculated
    note: Annotated[str, Strict(), Field(max_length=MAX_NOTE_CHARS)] = ""


@dataclass
class AlignedToken:
    """A cross-tokenizer round: one token the draft proposed in its own vocabulary, and the
    target's candidates (indices into the round's `drafted`) its text became."""

    id: TokenId
    text: Short
    candidates: PerNode[Annotated[int, Strict(), Field(ge=0, lt=MAX_TREE_NODES)]]


@dataclass
class RoundEvent:
    """One draft/verify round. A tree round also lists every drafted node in `tree`; its
    `drafted` are the nodes the target checked along the path it took, in order, so the
    token stream draws chains and trees alike."""

    index: EventIndex
    k: NodeCount  # draft length actually used this round
    drafted: PerNode[DraftToken]
    emitted: EmittedToken | None  # None only when the run stopped on an accepted EOS/limit
    # one per drafted token, plus the bonus position when reached
    positions: Annotated[list[PositionInfo], Field(max_length=MAX_TREE_NODES + 1)]
    draft_ms: Millis
    verify_ms: Millis
    t_end_s: Seconds  # seconds since the run started when this round's tokens were known
    new_tokens: Count  # total new tokens after this round
    type: Literal["round"] = "round"
    # every drafted node of a tree round; empty for a chain
    tree: Annotated[PerNode[TreeNode], AfterValidator(_tree_shape)] = field(default_factory=list)
    # a draft with another tokenizer: its own tokens
    alignment: PerNode[AlignedToken] = field(default_factory=list)
    source: CandidateSource | None = None  # a draft-free tree drafter's round: where its candidates came from
    policy_note: Literal[POLICY_NOTES] = ""  # why the policy drafted nothing, or only to check

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

    index: EventIndex
    id: TokenId
    text: Short
    p: Probability
    ms: Millis
    t_end_s: Seconds
    type: Literal["plain"] = "plain"


Event = Union[RoundEvent, PlainTokenEvent]


@dataclass
class RunSummary:
    """What a run came to: its counts, rates and times."""

    new_tokens: Count = 0
    rounds: Count = 0
    target_passes: Count = 0
    draft_passes: Count = 0
    drafted: Count = 0  # drafted tokens that were tested against the target
    accepted: Count = 0
    acceptance_rate: Ratio = 0.0  # accepted / drafted
    mean_overlap: Ratio = 0.0  # mean beta over tested positions (the measured alpha)
    tokens_per_round: Ratio = 0.0
    wall_s: Seconds = 0.0  # generation only, model loading excluded
    tokens_per_s: Ratio = 0.0
    target_ms: Millis = 0.0  # mean ms of one target forward pass (T)
    draft_ms: Millis = 0.0  # mean ms of one drafted token (D)
    load_s: Seconds = 0.0
    stop_reason: Short = ""  # "eos", "max_new_tokens", "cancelled", "time_limit"
    policy: Short = ""  # the draft-length policy of a speculative run: fixed, heuristic or cost-aware
    # Plain decoding's cost of a token: the one-token target pass of the pair's cost model,
    # measured when the pair loaded, so a trace's speedup does not depend on what else ran.
    plain_ms_per_token: Millis = 0.0
    speedup_vs_plain: Ratio = 0.0  # tokens_per_s over 1000 / plain_ms_per_token (0 when unknown)
    # Filled when a speculative run has ended (empty in the traces streamed while it runs):
    # accepted / reached at each draft position
    acceptance_by_position: Annotated[list[Probability], Field(max_length=MAX_TREE_NODES + 1)] = field(
        default_factory=list
    )
    # per round: the best k in hindsight (`specviz.run_stats`)
    hindsight_k: Annotated[list[NodeCount], Field(max_length=MAX_EVENTS)] = field(default_factory=list)
    # Under an output format: tokens it forced that the target checked (not in `drafted`), of them
    # accepted, the ms its masks took per new token, and the finished text checked against it
    # (`grammar.formats.check_output`: "valid", or what is wrong).
    forced: Count = 0
    forced_accepted: Count = 0
    grammar_ms: Millis = 0.0
    format_check: Short = ""


def _older_settings(settings: Any) -> Any:
    """A trace recorded before the draft-length policy existed says `adaptive`: it is read as
    `settings.from_request` reads it. Unknown names are counted, never repeated."""
    if not isinstance(settings, dict):
        return settings  # the schema says what it should be
    adaptive = settings.get("adaptive")
    if adaptive is not None and "policy" not in settings and not isinstance(adaptive, bool):
        raise PydanticCustomError("settings", "adaptive: expected true or false")
    settings = adaptive_as_policy(dict(settings))
    unknown = settings.keys() - set(FIELDS)
    if unknown:
        raise PydanticCustomError("settings", f"{len(unknown)} unknown names (known: {', '.join(sorted(FIELDS))})")
    return settings


def _refused_by(check: Callable[[Any], Any], kind: str) -> AfterValidator:
    """A value that `check` accepts (a trace's settings rerun and its messages are sent as they
    are), else its UserError as the trace's refusal; an empty one has nothing to check."""

    def validate(value: Any) -> Any:
        try:
            if value:
                check(value)
        except UserError as e:
            raise PydanticCustomError(kind, str(e)) from None
        return value

    return AfterValidator(validate)


_SETTING_KINDS = {
    "whole": Annotated[int, Strict(), Field(ge=-(2**63), le=2**63)],
    "choice": Short,
    "number": Annotated[float, Strict(), Field(allow_inf_nan=False)],
    "flag": Annotated[bool, Strict()],
    "string": Long,
}
# GenerationSettings' fields as a trace stores them: the JSON types here, the ranges in `from_request`.
TraceSettings = TypedDict("TraceSettings", {name: _SETTING_KINDS[s.kind] for name, s in SPECS.items()}, total=False)


# The run's notes that views read, typed; the engine's other notes are kept as they are.
PassSize = Annotated[str, Strict(), Field(pattern=r"^[1-9][0-9]{0,3}$")]  # n new tokens in one pass, as a JSON key
# V(n) in ms by n: measured, so above 0 (views divide by V(1))
VerifyCosts = Annotated[
    dict[PassSize, Annotated[float, Strict(), Field(gt=0, le=MAX_RUN_S * 1000, allow_inf_nan=False)]],
    Field(max_length=MAX_TREE_NODES),
]


# The engine's other notes on a run (device, loops, a cost model's cache key, ...): kept as they
# are, but only as small JSON: texts, finite numbers, true or false, null, short lists of those,
# and objects of them nested NOTE_DEPTH levels at most, each at most MAX_NOTES long.
MAX_NOTES = 64
NOTE_DEPTH = 3
NOTE_WORDS = "a text, a number, true, false, null, a list of those or an object of them"


def _scalar(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, int):  # bool too
        return -(2**63) <= v <= 2**63
    return v is None or (isinstance(v, str) and len(v) <= MAX_NOTE_CHARS)


def _note(value: Any, depth: int = NOTE_DEPTH) -> Any:
    """`value` if it is a note (above), else a refusal saying what it is."""
    if _scalar(value):
        return value
    if isinstance(value, str):
        raise PydanticCustomError("notes", f"a text of {len(value)} characters; the limit is {MAX_NOTE_CHARS}")
    if isinstance(value, (list, dict)) and len(value) > MAX_NOTES:
        raise PydanticCustomError("notes", f"{_kind(value)} of {len(value)} items; the limit is {MAX_NOTES}")
    if isinstance(value, list) and all(_scalar(v) for v in value):
        return value
    if isinstance(value, dict) and depth > 0:
        for key, v in value.items():
            if len(key) > MAX_TOKEN_CHARS:
                raise PydanticCustomError("notes", f"a name of {len(key)} characters; the limit is {MAX_TOKEN_CHARS}")
            _note(v, depth - 1)
        return value
    if isinstance(value, (list, dict)):
        raise PydanticCustomError("notes", f"nested too deeply: a note is {NOTE_WORDS}, {NOTE_DEPTH} levels at most")
    raise PydanticCustomError("notes", f"expected {NOTE_WORDS}, got {_kind(value)}")


Note = Annotated[
    Any,
    AfterValidator(_note),
    WithJsonSchema(
        {
            "description": f"{NOTE_WORDS}, nested {NOTE_DEPTH} levels at most",
            "type": ["string", "number", "boolean", "null", "array", "object"],
            "maxLength": MAX_NOTE_CHARS,
            "maxItems": MAX_NOTES,
            "maxProperties": MAX_NOTES,
        }
    ),
]


@with_config(ConfigDict(extra="allow"))
class CostRecord(TypedDict, total=False, extra_items=Note):
    """A pair's costs as measured at load (`CostModel.to_dict`): V(n) in ms by n, and D."""

    verify: VerifyCosts
    draft: Millis


# One runtime's V(n) and D, for the Theory and Labs tabs' comparison of runtimes.
RuntimeCosts = Annotated[CostRecord, BeforeValidator(older_shape)]


@with_config(ConfigDict(extra="allow"))
class TraceMeta(TypedDict, total=False, extra_items=Note):
    """How the run was made: runtime, drafter, costs, and the engine's other notes."""

    runtime: Short | None
    drafter: Short | None
    cost_model: CostRecord | None
    policy_costs: CostRecord | None  # this run's own, as the cost-aware policy priced its last round
    runtime_costs: Annotated[dict[Short, RuntimeCosts], Field(max_length=16)]


def _few_notes(meta: Any) -> Any:
    """The notes counted before each is read: at most MAX_NOTES, whatever their names."""
    if isinstance(meta, dict) and len(meta) > MAX_NOTES:
        raise PydanticCustomError("notes", f"{len(meta)} notes; the limit is {MAX_NOTES}")
    return meta


@with_config(ConfigDict(extra="forbid"))
class SpecDecodingMetrics(TypedDict, total=False):
    """A finished speculative run's counts under vLLM's per-request names (`run_stats.request_metrics`)."""

    mean_acceptance_length: Ratio
    draft_acceptance_rate: Probability
    acceptance_histogram: Annotated[list[Count], Field(max_length=MAX_TREE_NODES + 1)]
    num_spec_steps: Count
    num_accepted_draft_tokens: Count
    num_draft_tokens: Count
    num_spec_tokens: NodeCount


@with_config(ConfigDict(extra="forbid"))
class TraceMetrics(TypedDict, total=False):
    speculative_decoding: SpecDecodingMetrics


@dataclass
class Trace:
    """A whole run: what was asked, what came out and every event in between."""

    prompt: Long
    settings: Annotated[TraceSettings, BeforeValidator(_older_settings), _refused_by(from_request, "settings")]
    text: Long
    token_ids: Annotated[list[TokenId], Field(max_length=MAX_NEW_TOKENS_CAP)]
    events: Annotated[list[Annotated[Event, Field(discriminator="type")]], Field(max_length=MAX_EVENTS)]
    summary: RunSummary
    mode: Literal[SPECULATIVE, PLAIN] = SPECULATIVE  # the MODES names
    pair: Annotated[str, Strict(), Field(max_length=4096)] = ""
    version: Literal[TRACE_VERSION] = TRACE_VERSION
    meta: Annotated[TraceMeta, BeforeValidator(_few_notes)] = field(default_factory=dict)
    # A finished speculative run's counts under vLLM's per-request names
    # (`run_stats.request_metrics`), as {"speculative_decoding": {...}}; empty otherwise.
    metrics: TraceMetrics = field(default_factory=dict)
    # A conversation's messages ({"role", "content"}) where the run was given one; `prompt`
    # is then its last user message.
    messages: Annotated[
        list[dict[str, Long]], Field(max_length=MAX_MESSAGES), _refused_by(check_prompt, "messages")
    ] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        return _validated(d)

    @classmethod
    def from_json(cls, s: str | bytes) -> "Trace":
        return load_trace(s, max_bytes=None)


class TraceError(UserError):
    """A trace that cannot be read: the message says why, in one line a user can act on."""


def check_trace_size(size: int, max_bytes: int = MAX_TRACE_BYTES) -> None:
    """Refuse a trace of `size` bytes over the limit: called before it is read in."""
    if size > max_bytes:
        raise TraceError(f"the trace is {_bytes(size)}; the limit is {_bytes(max_bytes)}")


def _bytes(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n} bytes"


def load_trace(data: str | bytes, *, max_bytes: int | None = MAX_TRACE_BYTES) -> Trace:
    """A Trace from untrusted text or bytes (an upload), or a TraceError saying what is wrong.

    Nothing else escapes: not JSON, not UTF-8, too large, nested too deeply, a field of the
    wrong type, out of its bounds or a non-finite number all become one TraceError. A trace
    that loads holds only what its dataclasses declare, so everything that draws it can trust them.
    """
    binary = isinstance(data, (bytes, bytearray))
    if max_bytes is not None:
        check_trace_size(len(data) if binary else len(data.encode("utf-8", "surrogatepass")), max_bytes)
    containers = data.count(b"{") + data.count(b"[") if binary else data.count("{") + data.count("[")
    if containers > MAX_JSON_CONTAINERS:  # an upper bound (brackets in strings count too), counted before parsing
        raise TraceError(f"the trace has {containers} objects and lists; the limit is {MAX_JSON_CONTAINERS}")
    values = (data.count(b",") if binary else data.count(",")) + 1  # an upper bound, as the brackets above
    if values > MAX_JSON_VALUES:
        raise TraceError(f"the trace has {values} values; the limit is {MAX_JSON_VALUES}")
    if binary:
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
    return _validated(d)


@functools.cache
def _adapter() -> TypeAdapter:
    return TypeAdapter(Trace)


def _validated(d: Any) -> Trace:
    try:
        return _adapter().validate_python(d)
    except ValidationError as e:
        raise TraceError(_refusal(e.errors(include_url=False))) from None


# --- one line for a refusal ------------------------------------------------------------------

EXPECTED = {
    "int_type": "a whole number",
    "float_type": "a finite number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "dataclass_type": "an object",
    "model_attributes_type": "an object",
    "typed_dict_type": "an object",
}
NOUNS = {
    "events": "events",
    "tree": "tree nodes",
    "drafted": "drafted tokens",
    "positions": "positions",
    "top": "top tokens",
    "token_ids": "token ids",
    "messages": "messages",
    "alignment": "aligned tokens",
}
# A bound passed, as its refusal says it: the bound's name in pydantic's context, and the words before it.
BOUNDS = {
    "less_than_equal": ("le", "the limit is"),
    "less_than": ("lt", "it must be under"),
    "greater_than": ("gt", "it must be above"),
    "greater_than_equal": ("ge", "the least allowed is"),
}
LIMITS = {"too_long", "string_too_long", "finite_number", *BOUNDS}


def _refusal(errors: list[dict]) -> str:
    """The first limit passed (else the first error), in words: where, what was found and
    what is allowed. Numbers are repeated, never the file's text."""
    e = next((x for x in errors if x["type"] in LIMITS), errors[0])
    where, kind, ctx, value = _where(e["loc"]), e["type"], e.get("ctx", {}), e.get("input")
    if kind == "missing":
        names = sorted(str(x["loc"][-1]) for x in errors if x["type"] == "missing" and x["loc"][:-1] == e["loc"][:-1])
        return f"{_where(e['loc'][:-1])}: missing {', '.join(names)}"
    if kind == "too_long":
        noun = NOUNS.get(e["loc"][-1], "items") if e["loc"] else "items"
        return f"{where} has {ctx['actual_length']} {noun}; the limit is {ctx['max_length']}"
    if kind == "string_too_long":
        return f"{where} has {len(value)} characters; the limit is {ctx['max_length']}"
    if kind in BOUNDS:
        bound, words = BOUNDS[kind]
        return f"{where} is {_number(value)}; {words} {_number(ctx[bound])}"
    if kind == "string_pattern_mismatch" and e["loc"][-1:] == ("[key]",):
        return f"{_where(e['loc'][:-2])} has a key that is not a number of tokens from 1 to 9999"
    if kind == "finite_number":
        return f"{where} is {value}; expected a finite number"
    if kind == "literal_error":
        return f"{where}: expected {ctx['expected']}, got {_kind(value)}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = value.get("type") if isinstance(value, dict) else None
        return f"{where}.type: expected 'round' or 'plain', got {_kind(tag)}"
    if kind in EXPECTED:
        return f"{where}: expected {EXPECTED[kind]}, got {_kind(value)}"
    return f"{where}: {e['msg']}"


def _where(loc: tuple) -> str:
    """A place in the trace, as `trace.events[3].tree`; an event's tag and keys that are not
    plain names (they come from the file) are left out."""
    out = "trace"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (i == 2 and loc[0] == "events" and part in ("round", "plain")):
            out += f".{part}" if re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", part) else ".<a key>"
    return out


def _number(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"


def _kind(value: Any) -> str:
    """What a JSON value is, for messages: a number as itself, anything else never (it may be huge or hostile)."""
    if type(value) in (int, float):
        return _number(value)
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# --- the JSON Schema: `python -m specviz schema` ---------------------------------------------


def trace_schema() -> dict[str, Any]:
    """The JSON Schema of a trace file, generated from the dataclasses above."""
    schema = _adapter().json_schema()
    for name, part in schema["$defs"].items():  # stdlib dataclasses' docstrings are not read by pydantic
        doc = getattr(globals().get(name), "__doc__", None)
        if doc and "description" not in part:
            part["description"] = inspect.cleandoc(doc)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "specviz trace",
        "description": Trace.__doc__,
        **{k: v for k, v in schema.items() if k != "title"},
    }


def schema_text() -> str:
    """docs/trace.schema.json as it must read."""
    return json.dumps(trace_schema(), indent=1, ensure_ascii=False) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", help="write the schema to this file (default: print it)")


def run(args: argparse.Namespace) -> int:
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(schema_text())
    else:
        sys.stdout.write(schema_text())
    return 0
