"""Generation settings shared by the CLI, the page, the API and the bench, with validation.

Every default, range and choice a user can meet lives here: the page's widgets, the API's
signature and the CLI's flags read them from this module, so all of them refuse bad input
with the same words and a trace's settings rerun exactly as recorded (`from_request`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from specviz.choices import COST_AWARE, DRAFTERS, FIXED, MODES, POLICIES, RUNTIMES, Registry, SPECULATIVE, VOCAB_METHODS
from specviz.errors import UserError

MAX_K = 16
MAX_NEW_TOKENS_CAP = 1024


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

# Inclusive numeric ranges (the page's sliders span them; top-p's lower end is open).
RANGES: dict[str, tuple[float, float]] = {
    "k": (1, MAX_K),
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "max_new_tokens": (1, MAX_NEW_TOKENS_CAP),
    "adaptive_threshold": (0.0, 1.0),
    "tree_nodes": (1, 64),
    "tree_width": (1, 8),
    "suffix_max_nodes": (1, 64),
    "suffix_min_score": (0.0, 1.0),
    "lookahead_window": (1, 16),
    "lookahead_ngram": (3, 8),
    "lookahead_candidates": (1, 16),
}

HELP = {
    "k": "tokens drafted per round: the fixed k, or the most a round may draft under the other policies",
    "policy": "how many tokens each round drafts",
    "temperature": "0 is greedy",
    "top_p": "nucleus sampling mass; 1 disables",
    "top_k": "keep the k most likely tokens; 0 disables",
    "raw": "send the prompt as-is, without the chat template",
    "early_exit_layers": "layers of the target the early-exit drafter uses (0: a quarter)",
    "adaptive_threshold": "heuristic policy: draft confidence below which a round's drafting stops",
    "tree_nodes": "tree drafter: the most drafted nodes per round (all verified in one target pass)",
    "tree_width": "tree drafter: the most children per node (the draft's most likely tokens there)",
    "suffix_max_nodes": "suffix drafter: the most nodes of its speculation tree per round",
    "suffix_min_score": "suffix drafter: a node joins the tree only if at least this share of the earlier matches continued that way",
    "lookahead_window": "lookahead drafter: W, the Jacobi window's columns (guessed future positions)",
    "lookahead_ngram": "lookahead drafter: N, the n-gram size (the window has N - 1 levels)",
    "lookahead_candidates": "lookahead drafter: G, the most n-grams verified per round",
    "runtime": "what runs the models",
    "vocab_method": "a draft with another tokenizer: how it drafts for the target",
}


class SettingsError(UserError):
    """Input a user can fix: the message says what is wrong and what is allowed."""


@dataclass(frozen=True)
class GenerationSettings:
    # The API takes these after its leading parameters in this order (app.page.api_signature):
    # a new field goes last.
    temperature: float = 0.0  # 0 means greedy
    top_k: int = 0  # 0 disables top-k
    top_p: float = 1.0  # 1.0 disables top-p
    max_new_tokens: int = 128
    seed: int = 0
    k: int = MAX_K  # the fixed k, or the cap of the heuristic and cost-aware policies: default_k(policy)
    policy: str = POLICIES.default  # one of choices.POLICIES
    drafter: str = DRAFTERS.default  # one of choices.DRAFTERS
    mode: str = MODES.default  # one of choices.MODES
    raw: bool = False  # send the prompt as-is instead of through the chat template
    early_exit_layers: int = 0  # layers of the target used by the early-exit drafter (0: a quarter)
    adaptive_threshold: float = 0.4  # heuristic policy: stop a round's drafting below this draft confidence
    tree_nodes: int = 8  # tree drafter: node budget per round
    tree_width: int = 2  # tree drafter: children per node at most
    vocab_method: str = VOCAB_METHODS.default  # a draft with another tokenizer: one of choices.VOCAB_METHODS
    runtime: str = RUNTIMES.default  # what runs the models: one of choices.RUNTIMES
    suffix_max_nodes: int = 16  # suffix drafter: speculation tree size at most
    suffix_min_score: float = 0.1  # suffix drafter: a node's least share of the matches that continued through it
    lookahead_window: int = 4  # lookahead drafter: W
    lookahead_ngram: int = 3  # lookahead drafter: N
    lookahead_candidates: int = 4  # lookahead drafter: G

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def needs_draft(self) -> bool:
        """Whether a run with these settings needs the pair's draft model loaded."""
        return self.mode == SPECULATIVE and self.drafter in DRAFTERS and DRAFTERS[self.drafter].needs_draft

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validated(self) -> "GenerationSettings":
        """Return self, or raise SettingsError naming the first bad value."""
        lo, hi = RANGES["k"]
        _check(isinstance(self.k, int) and not isinstance(self.k, bool) and lo <= self.k <= hi, f"k must be a whole number from {lo} to {hi} (got {self.k!r})")
        lo, hi = RANGES["temperature"]
        _check(_num(self.temperature) and lo <= self.temperature <= hi, f"temperature must be between {lo:g} and {hi:g} (got {self.temperature!r})")
        lo, hi = RANGES["top_p"]
        _check(_num(self.top_p) and lo < self.top_p <= hi, f"top-p must be above {lo:g} and at most {hi:g} (got {self.top_p!r})")
        _check(_whole(self.top_k) and self.top_k >= 0, f"top-k must be a whole number, 0 or more (got {self.top_k!r})")
        lo, hi = RANGES["max_new_tokens"]
        _check(_whole(self.max_new_tokens) and lo <= self.max_new_tokens <= hi, f"max new tokens must be a whole number from {lo} to {hi} (got {self.max_new_tokens!r})")
        _check(_whole(self.seed) and 0 <= self.seed < 2**63, f"seed must be a whole number, 0 or more (got {self.seed!r})")
        for name, registry in CHOSEN.items():
            value = getattr(self, name)
            _check(value in registry, f"{registry.kind} must be one of {', '.join(registry.names)} (got {value!r})")
        _check(isinstance(self.raw, bool), f"raw must be true or false (got {self.raw!r})")
        _check(_whole(self.early_exit_layers) and self.early_exit_layers >= 0, "early-exit layers must be 0 or more")
        for name, what in (("tree_nodes", "tree nodes"), ("tree_width", "tree width"), ("suffix_max_nodes", "suffix max nodes"),
                           ("lookahead_window", "lookahead window"), ("lookahead_ngram", "lookahead n-gram size"),
                           ("lookahead_candidates", "lookahead candidates")):
            lo, hi = RANGES[name]
            value = getattr(self, name)
            _check(_whole(value) and lo <= value <= hi, f"{what} must be a whole number from {lo} to {hi} (got {value!r})")
        for name, what in (("adaptive_threshold", "adaptive threshold"), ("suffix_min_score", "suffix min score")):
            lo, hi = RANGES[name]
            value = getattr(self, name)
            _check(_num(value) and lo <= value <= hi, f"{what} must be between {lo:g} and {hi:g} (got {value!r})")
        return self


DEFAULTS = GenerationSettings()
# The settings that name a registry's entry.
CHOSEN: dict[str, Registry] = {"policy": POLICIES, "drafter": DRAFTERS, "mode": MODES, "runtime": RUNTIMES,
                               "vocab_method": VOCAB_METHODS}
FIELDS = tuple(f.name for f in fields(GenerationSettings))
WHOLE = {"k", "top_k", "max_new_tokens", "seed", "early_exit_layers", "tree_nodes", "tree_width", "suffix_max_nodes",
         "lookahead_window", "lookahead_ngram", "lookahead_candidates"}
NUMBERS = {"temperature", "top_p", "adaptive_threshold", "suffix_min_score"}
# The draft-free tree drafters' own settings, in the order the page and the API take them.
DRAFT_FREE_SETTINGS = ("suffix_max_nodes", "suffix_min_score", "lookahead_window", "lookahead_ngram", "lookahead_candidates")


def from_request(values: Mapping[str, Any]) -> GenerationSettings:
    """Validated settings from a page's, an API caller's or a trace's values.

    Every field given is kept (missing ones take their defaults), so a trace reruns exactly
    as it was recorded; a missing k is the policy's default (`default_k`). Numbers are taken
    as a browser or JSON sends them: 4.0 counts as the whole number 4. `adaptive` (settings
    before the policy existed, and the API's older parameter) means `policy="cost-aware"`
    when true and `"fixed"` when false, unless a policy is given too.
    """
    values = dict(values)
    adaptive = values.pop("adaptive", None)
    if adaptive is not None and "policy" not in values:
        values["policy"] = COST_AWARE if adaptive else FIXED
    unknown = sorted(values.keys() - set(FIELDS))
    if unknown:
        raise SettingsError(f"unknown setting {unknown[0]!r} (known: {', '.join(FIELDS)})")
    if "k" not in values and isinstance(values.get("policy"), str):
        values["k"] = default_k(values["policy"])
    for name in WHOLE & values.keys():
        x = values[name]
        values[name] = int(x) if isinstance(x, float) and x.is_integer() else x
    for name in NUMBERS & values.keys():
        x = values[name]
        values[name] = float(x) if isinstance(x, int) and not isinstance(x, bool) else x
    return GenerationSettings(**values).validated()


ROLES = ("system", "user", "assistant")


def check_prompt(prompt: object) -> str | list[dict]:
    """The prompt, if it has something in it; checked before any model is loaded. A prompt
    is the user's message, or a conversation: a list of {"role", "content"} messages (roles
    system, user, assistant) that ends with the user's turn."""
    if isinstance(prompt, list):
        for i, m in enumerate(prompt):
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str) \
                    or not m["content"].strip() or set(m) - {"role", "content"}:
                raise UserError(f"message {i + 1} of the conversation needs a role ({', '.join(ROLES)}) and some content, nothing else")
        if not prompt or prompt[-1]["role"] != "user":
            raise UserError("a conversation must end with the user's message, for the model to answer")
        return [dict(role=m["role"], content=m["content"]) for m in prompt]
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError("the prompt is empty: type something for the model to continue")
    return prompt


def prompt_text(prompt: str | list[dict]) -> str:
    """What a reader sees of a prompt: itself, or a conversation's last user message."""
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def _whole(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SettingsError(message)
