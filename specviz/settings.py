"""Generation settings shared by the CLI, the page, the API and the bench, with validation.

A setting is declared once: its field in `GenerationSettings`, whose metadata (`Setting`)
holds its help, label and range. Validation, the CLI's flags (workshop/generate_cli.py), the API's
signature (app/page.py) and the page's controls (app/live.py) are derived from the fields,
so all of them refuse bad input with the same words, and a trace's settings rerun exactly
as recorded (`from_request`). A `GenerationSettings` that exists is valid: it checks itself
when made. The prompt's bounds (`PROMPT`) are declared here too.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from specviz.choices import (
    COST_AWARE,
    DRAFTERS,
    FIXED,
    FORMATS,
    MODES,
    POLICIES,
    RUNTIMES,
    Registry,
    SPECULATIVE,
    VOCAB_METHODS,
)
from specviz.errors import UserError, shown
from specviz.limits import FORMAT_CHARS, Limit

MAX_K = 16
MAX_NEW_TOKENS_CAP = 1024
MAX_SEED = 2**63 - 1
# Above any vocabulary (top-k past it keeps every token) and any model's depth: bounds, not choices.
MAX_TOP_K = 2**20
MAX_LAYERS = 1024


def no_draft_help(*, flag: bool = False) -> str:
    """What a user without a draft model can use instead, in words (`flag`: as the CLI's option)."""
    free = DRAFTERS.where(needs_draft=False)
    names = f"{', '.join(free[:-1])} or {free[-1]}"
    return f"use --drafter {names}" if flag else f"use the {names} drafter"


# k's default depends on the policy. A fixed k defaults to the classic 4. The adaptive
# policies' cap is the largest k offered: where a verify pass over 17 tokens costs little
# more than one (bf16 on a CPU with native bf16, any GPU), a confident draft's long run pays,
# and both policies end a round on the draft's confidence, not on the cap.
FIXED_K = 4


def default_k(policy: str) -> int:
    """k when none is given: the fixed k, or the cap of a policy that sizes its own rounds."""
    return MAX_K if policy not in POLICIES or POLICIES[policy].adaptive else FIXED_K


def default_words(name: str) -> str:
    """A setting's default in words, for a --help line (k's follows the policy)."""
    if name == "k":
        return f"{default_k(FIXED)} under the {FIXED} policy, else {default_k(DEFAULTS.policy)}"
    return str(getattr(DEFAULTS, name))


class SettingsError(UserError):
    """Input a user can fix: the message says what is wrong and what is allowed."""


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def _whole(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SettingsError(message)


_got = shown  # a refused value as a message shows it: cut short, however long


# A setting's kind follows from its field's type (a str: a choice where it names a registry's
# entry, else a string).
KINDS = {"bool": "flag", "int": "whole", "float": "number", "str": "choice"}


@dataclass(frozen=True)
class Setting:
    """What one setting is besides its type and default: its words, its range and its control."""

    help: str
    label: str  # the page's label
    span: tuple[float, float | None] | None = None  # inclusive range; None as its end: no upper end
    open_low: bool = False  # the lower end itself is refused (top-p)
    registry: Registry | None = None  # a setting that names one of a registry's entries
    step: float = 1  # the page's step
    shown: tuple[float, float] | None = None  # the page's slider where it spans less than `span`
    box: bool = False  # a number box on the page instead of a slider
    info: str | None = None  # the page's line under the control (None: the help; "": none)
    words: str = ""  # how a message names it (default: the name, spaced)
    kind: str = ""  # flag, whole, number, choice or string: set from the field's type
    limit: Limit | None = None  # a string: its length's bound

    def check(self, name: str, value: Any) -> None:
        """Raise SettingsError naming the setting, its range and the value, unless it fits."""
        what = self.words or (self.registry.kind if self.registry else name.replace("_", " "))
        if self.kind == "choice":
            _check(
                value in self.registry, f"{what} must be one of {', '.join(self.registry.names)} (got {_got(value)})"
            )
        elif self.kind == "flag":
            _check(isinstance(value, bool), f"{what} must be true or false (got {_got(value)})")
        elif self.kind == "string":
            _check(isinstance(value, str), f"{what} must be text (got {_got(value)})")
            self.limit.check_text(value, what)
        elif self.kind == "whole":
            lo, hi = self.span
            upto = (
                f", {lo} or more"
                if hi is None
                else f", {lo} or more (below 2**63)"
                if hi == MAX_SEED
                else f" from {lo} to {hi}"
            )
            _check(
                _whole(value) and lo <= value and (hi is None or value <= hi),
                f"{what} must be a whole number{upto} (got {_got(value)})",
            )
        else:
            lo, hi = self.span
            words = f"above {lo:g} and at most {hi:g}" if self.open_low else f"between {lo:g} and {hi:g}"
            above = _num(value) and (value > lo if self.open_low else value >= lo)
            _check(above and value <= hi, f"{what} must be {words} (got {_got(value)})")


def setting(default: Any, help: str, label: str, **more: Any) -> Any:
    """A GenerationSettings field: its default, and what `Setting` says of it."""
    return field(default=default, metadata={"setting": Setting(help, label, **more)})


@dataclass(frozen=True)
class GenerationSettings:
    # The API takes these after its leading parameters in this order (app.page.api_signature):
    # a new field goes last.
    temperature: float = setting(0.0, "0 is greedy", "Temperature", span=(0.0, 2.0), step=0.05)
    top_k: int = setting(
        0,
        "keep the k most likely tokens; 0 disables",
        "Top-k",
        span=(0, MAX_TOP_K),
        box=True,
        info="0 = off",
        words="top-k",
    )
    top_p: float = setting(
        1.0,
        "nucleus sampling mass; 1 disables",
        "Top-p",
        span=(0.0, 1.0),
        open_low=True,
        step=0.05,
        info="",
        words="top-p",
    )
    max_new_tokens: int = setting(
        128, "the most tokens generated", "Max new tokens", span=(1, MAX_NEW_TOKENS_CAP), shown=(1, 512), info=""
    )
    seed: int = setting(0, "the random seed of sampling", "Seed", span=(0, MAX_SEED), box=True, info="")
    # The fixed k, or the cap of the heuristic and cost-aware policies: default_k(policy) when none is given.
    k: int = setting(
        MAX_K,
        "tokens drafted per round: the fixed k, or the most a round may draft under the other policies",
        "k: the fixed k, or the most a round drafts",
        span=(1, MAX_K),
        info="",
    )
    policy: str = setting(
        POLICIES.default, "how many tokens each round drafts", "Draft length per round", registry=POLICIES
    )
    drafter: str = setting(DRAFTERS.default, "how tokens are drafted", "Drafter", registry=DRAFTERS, info="")
    mode: str = setting(MODES.default, "how the target decodes", "Decoding", registry=MODES, info="")
    raw: bool = setting(False, "send the prompt as-is, without the chat template", "Raw prompt")
    early_exit_layers: int = setting(
        0,
        "layers of the target the early-exit drafter uses (0: a quarter)",
        "Early-exit layers",
        span=(0, MAX_LAYERS),
        box=True,
        words="early-exit layers",
    )
    adaptive_threshold: float = setting(
        0.4,
        "heuristic policy: draft confidence below which a round's drafting stops",
        "Heuristic confidence cut",
        span=(0.0, 1.0),
        step=0.05,
    )
    tree_nodes: int = setting(
        8,
        "tree drafter: the most drafted nodes per round (all verified in one target pass)",
        "Tree: nodes per round",
        span=(1, 64),
    )
    tree_width: int = setting(
        2,
        "tree drafter: the most children per node (the draft's most likely tokens there)",
        "Tree: children per node",
        span=(1, 8),
    )
    vocab_method: str = setting(
        VOCAB_METHODS.default,
        "a draft with another tokenizer: how it drafts for the target",
        "Draft with another tokenizer",
        registry=VOCAB_METHODS,
    )
    runtime: str = setting(RUNTIMES.default, "what runs the models", "Runtime", registry=RUNTIMES)
    suffix_max_nodes: int = setting(
        16, "suffix drafter: the most nodes of its speculation tree per round", "Suffix: most tree nodes", span=(1, 64)
    )
    suffix_min_score: float = setting(
        0.1,
        "suffix drafter: a node joins the tree only if at least this share of the earlier matches continued that way",
        "Suffix: least score of a node",
        span=(0.0, 1.0),
        step=0.05,
    )
    lookahead_window: int = setting(
        4,
        "lookahead drafter: W, the Jacobi window's columns (guessed future positions)",
        "Lookahead: window W",
        span=(1, 16),
    )
    lookahead_ngram: int = setting(
        3,
        "lookahead drafter: N, the n-gram size (the window has N - 1 levels)",
        "Lookahead: n-gram size N",
        span=(3, 8),
        words="lookahead n-gram size",
    )
    lookahead_candidates: int = setting(
        4, "lookahead drafter: G, the most n-grams verified per round", "Lookahead: n-grams verified G", span=(1, 16)
    )
    output_format: str = setting(
        FORMATS.default, "what the output must be (constrained decoding)", "Output format", registry=FORMATS
    )
    output_spec: str = setting(
        "",
        "the output format's JSON schema, regular expression, choices (a JSON list or one a line) or grammar",
        "Schema, pattern, choices or grammar",
        limit=FORMAT_CHARS,
        words="the output format",
    )

    def __post_init__(self) -> None:
        for name, s in SPECS.items():
            s.check(name, getattr(self, name))
        from specviz.grammar.formats import parse

        parse(self.output_format, self.output_spec)  # a bad schema or grammar stops here, in one line

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def needs_draft(self) -> bool:
        """Whether a run with these settings needs the pair's draft model loaded."""
        return self.mode == SPECULATIVE and self.drafter in DRAFTERS and DRAFTERS[self.drafter].needs_draft

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _specs() -> dict[str, Setting]:
    """Each field's `Setting`, by name in declared order, its kind set from the field's type."""
    hints = typing.get_type_hints(GenerationSettings)
    kinds = {f.name: KINDS[hints[f.name].__name__] for f in fields(GenerationSettings)}
    return {
        f.name: replace(
            f.metadata["setting"],
            kind="string" if kinds[f.name] == "choice" and f.metadata["setting"].registry is None else kinds[f.name],
        )
        for f in fields(GenerationSettings)
    }


SPECS = _specs()
DEFAULTS = GenerationSettings()
FIELDS = tuple(SPECS)


def from_request(values: Mapping[str, Any]) -> GenerationSettings:
    """Validated settings from a page's, an API caller's or a trace's values.

    Every field given is kept (missing ones take their defaults), so a trace reruns exactly
    as it was recorded; a missing k is the policy's default (`default_k`). Numbers are taken
    as a browser or JSON sends them: 4.0 counts as the whole number 4. `adaptive` (settings
    before the policy existed, and the API's older parameter) is read as `adaptive_as_policy` says.
    """
    values, known = adaptive_as_policy(dict(values)), SPECS
    unknown = sorted(values.keys() - known.keys())
    if unknown:
        raise SettingsError(f"unknown setting {_got(unknown[0])} (known: {', '.join(known)})")
    if "k" not in values and isinstance(values.get("policy"), str):
        values["k"] = default_k(values["policy"])
    for name, x in values.items():
        if known[name].kind == "whole" and isinstance(x, float) and x.is_integer():
            values[name] = int(x)
        elif known[name].kind == "number" and _whole(x):
            values[name] = float(x)
    return GenerationSettings(**values)


def adaptive_as_policy(values: dict) -> dict:
    """`values` without `adaptive`, which means `policy="cost-aware"` when true and `"fixed"`
    when false, unless a policy is given too."""
    adaptive = values.pop("adaptive", None)
    if adaptive is not None and "policy" not in values:
        values["policy"] = COST_AWARE if adaptive else FIXED
    return values


@dataclass(frozen=True)
class PromptSetting:
    """The prompt's words and bounds, checked before any tokenizer sees it (`check_prompt`)."""

    help: str
    label: str
    chars: Limit  # a prompt, or all a conversation's messages together
    messages: Limit  # a conversation's turns


PROMPT = PromptSetting(
    "the user message (or raw text with --raw)",
    "Prompt",
    chars=Limit(
        "the prompt",
        100_000,
        "SPECVIZ_MAX_PROMPT_CHARS",
        "characters of a prompt, or of a conversation's messages together (page, API, MCP, CLI)",
        "characters",
    ),
    messages=Limit(
        "the number of messages", 64, "SPECVIZ_MAX_MESSAGES", "messages of a conversation sent as the prompt"
    ),
)
ROLES = ("system", "user", "assistant")


def check_prompt(prompt: object) -> str | list[dict]:
    """The prompt, if it has something in it and is within `PROMPT`'s bounds; checked before
    any model is loaded or any tokenizer runs. A prompt is the user's message, or a
    conversation: a list of {"role", "content"} messages (roles system, user, assistant) that
    ends with the user's turn."""
    if isinstance(prompt, list):
        PROMPT.messages.check(len(prompt))
        for i, m in enumerate(prompt):
            if (
                not isinstance(m, dict)
                or m.get("role") not in ROLES
                or not isinstance(m.get("content"), str)
                or not m["content"].strip()
                or set(m) - {"role", "content"}
            ):
                raise UserError(
                    f"message {i + 1} of the conversation needs a role ({', '.join(ROLES)}) and some "
                    "content, nothing else"
                )
        PROMPT.chars.check(sum(len(m["content"]) for m in prompt), "the conversation")
        if not prompt or prompt[-1]["role"] != "user":
            raise UserError("a conversation must end with the user's message, for the model to answer")
        return [dict(role=m["role"], content=m["content"]) for m in prompt]
    if isinstance(prompt, str):
        PROMPT.chars.check_text(prompt)
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError("the prompt is empty: type something for the model to continue")
    return prompt


def prompt_text(prompt: str | list[dict]) -> str:
    """What a reader sees of a prompt: itself, or a conversation's last user message."""
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]
