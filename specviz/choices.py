"""Every choice a user makes by name, each in one registry: drafters, length policies,
precisions, runtimes, vocabulary methods and modes; the target's placements (DEVICE_MAPS) are
names only, a tuple.

An entry holds its name, the page's label, a line of help, what it needs and, for drafters
and policies, its factory. Settings validate against these registries, the page's radios
and dropdowns list them, the CLI's `choices=` and the bench's `sv-<drafter>` methods read
them, and `make_drafter` / `make_length` call the factory. Adding a drafter is therefore one
module and one `DRAFTERS.add(...)` (docs/ARCHITECTURE.md).

A factory is named as "module:function" and imported when a run first makes one, so this
module stays a leaf that the settings (and `--help`) can import without torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from specviz.lazy import named

CHAIN = "chain"  # proposes one line of tokens
MODEL_TREE = "model-tree"  # grows a tree from the draft model, sized by its node budget
DRAFT_FREE_TREE = "draft-free-tree"  # a tree without a draft model, sized by the tree cost rule

# Names that code refers to (the drafters and policies it treats apart).
MODEL = "model"
TREE = "tree"
LOOKUP = "lookup"
EARLY_EXIT = "early-exit"
HEAD = "head"
SUFFIX = "suffix"
LOOKAHEAD = "lookahead"
COST_AWARE = "cost-aware"
FIXED = "fixed"
HEURISTIC = "heuristic"

INT8 = "int8"  # the precision whose target is quantized (lm.torch_runtime.devices)
# How a draft with another tokenizer drafts (VOCAB_METHODS), and what a run does (MODES).
TEXT = "text"
INTERSECTION = "intersection"
SPECULATIVE = "speculative"
PLAIN = "plain"
# What a run's output must be (FORMATS, `specviz/grammar/`): free text, or text a grammar allows.
FREE_TEXT = "text"
JSON_SCHEMA = "json"
REGEX = "regex"
CHOICE = "choice"
GRAMMAR = "grammar"

# The runtimes by name (lm.runtime implements them); AUTO lets measurement choose.
AUTO = "auto"
TORCH = "torch"
LLAMACPP = "llama.cpp"

# What a runtime may offer beyond the model interface (lm.runtime).
TREE_PASS = TREE  # feed_tree / keep_path
EARLY_EXIT_PASS = EARLY_EXIT  # a forward through the target's first layers only
DEVICE_MAP = "device-map"  # a target spread over GPUs, CPU and disk
HF_GENERATE = "hf-generate"  # transformers' own generate on the same objects (bench references)
BATCHED = "batched-passes"  # passes over several sequences at once (the batching lab)

# Where the target's layers go (lm.torch_runtime.devices): whole on the pair's device, or spread
# by accelerate. Names only, no label or help of their own, so a tuple rather than a registry.
DEVICE_MAPS = ("none", AUTO)


@dataclass(frozen=True)
class Choice:
    name: str
    label: str  # the page's words
    help: str  # one line: --help, the API's docs
    factory: str = ""  # "module:function", imported on first use (a runtime's: its loader)
    opens: str = ""  # runtimes: "module:function" making an LM over one of its models, where they make none
    needs_draft: bool = False  # needs the pair's draft model loaded
    shape: str = CHAIN  # drafters: CHAIN, MODEL_TREE or DRAFT_FREE_TREE
    # drafters: what a drafted token costs the cost-aware policy at first (the run then times its own): the
    # ms themselves, "module:function" giving them from (pair, settings), or None for the draft model's measured D
    draft_cost: float | str | None = None
    capability: str = ""  # drafters: a runtime capability it needs (lm.runtime), "" for none
    reads_target: bool = False  # drafters: drafts from the run's target LM (its hidden states), passed as `target`
    adaptive: bool = False  # policies: k is a cap and the policy decides each round's length
    capabilities: frozenset[str] = field(default_factory=frozenset)  # runtimes: what they offer
    phrase: str = ""  # vocab methods: how the page's sentences say the draft drafts ("through text")
    explained: str = ""  # vocab methods: what the phrase means, where the page has room to say it

    def make(self, *args: Any, **kwargs: Any) -> Any:
        return named(self.factory)(*args, **kwargs)

    def draft_ms(self, pair: Any, settings: Any) -> float | None:
        """A drafter's price per drafted token as its entry states it (None: the draft model's D)."""
        cost = self.draft_cost
        return named(cost)(pair, settings) if isinstance(cost, str) else cost


class Registry:
    """The entries of one choice, in the order the page and --help list them."""

    def __init__(self, kind: str, *entries: Choice, default: str):
        self.kind = kind
        self._entries = {e.name: e for e in entries}
        self.default = default

    def __iter__(self) -> Iterator[Choice]:
        return iter(list(self._entries.values()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries  # any value a request may carry

    def __getitem__(self, name: str) -> Choice:
        return self._entries[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def labelled(self) -> list[tuple[str, str]]:
        """(label, name) pairs: a gradio Radio's or Dropdown's choices."""
        return [(e.label, e.name) for e in self]

    def where(self, **wanted: Any) -> tuple[str, ...]:
        """The names of the entries whose fields have these values."""
        return tuple(e.name for e in self if all(getattr(e, k) == v for k, v in wanted.items()))

    def add(self, entry: Choice) -> None:
        if entry.name in self._entries:
            raise ValueError(f"a {self.kind} named {entry.name!r} is already registered")
        self._entries[entry.name] = entry

    @contextmanager
    def added(self, entry: Choice) -> Iterator[Choice]:
        """`entry` registered for the duration of a with-block (a plug-in's test)."""
        self.add(entry)
        try:
            yield entry
        finally:
            del self._entries[entry.name]


DRAFTERS = Registry(
    "drafter",
    Choice(
        MODEL,
        "Draft model",
        "the pair's draft model, with its own KV cache",
        "specviz.drafters.model:make",
        needs_draft=True,
    ),
    Choice(
        TREE,
        "Token tree (the draft model's best guesses, verified in one pass)",
        "the draft model grows a tree of guesses, verified in one target pass",
        "specviz.drafters.tree:make",
        needs_draft=True,
        shape=MODEL_TREE,
        capability=TREE_PASS,
    ),
    Choice(
        LOOKUP,
        "Prompt lookup (n-grams of the prompt, no second model)",
        "prompt lookup: continue the latest n-gram match in the context",
        "specviz.drafters.lookup:make",
        shape=DRAFT_FREE_TREE,
        draft_cost=0.0,
    ),
    Choice(
        EARLY_EXIT,
        "Early exit (the target's first layers)",
        "the target's own first L layers, final norm and LM head",
        "specviz.drafters.early_exit:make",
        draft_cost="specviz.drafters.early_exit:draft_ms",
        capability=EARLY_EXIT_PASS,
    ),
    Choice(
        HEAD,
        "Draft head (the target's own state, run ahead by a trained head)",
        "a head trained here runs the target's last hidden state ahead (EAGLE-style; train-head)",
        "specviz.drafters.head:make",
        draft_cost="specviz.drafters.head:draft_ms",
        reads_target=True,
    ),
    Choice(
        SUFFIX,
        "Suffix (a tree of what followed earlier matches, no second model)",
        "a speculation tree from what followed the context's longest earlier match",
        "specviz.drafters.suffix:make",
        shape=DRAFT_FREE_TREE,
        draft_cost=0.0,
        capability=TREE_PASS,
    ),
    Choice(
        LOOKAHEAD,
        "Lookahead (the target's own Jacobi guesses, no second model)",
        "the target's own Jacobi iterations guess n-grams, verified as a tree",
        "specviz.drafters.lookahead:make",
        shape=DRAFT_FREE_TREE,
        draft_cost=0.0,
        capability=TREE_PASS,
    ),
    default=MODEL,
)

POLICIES = Registry(
    "policy",
    Choice(
        COST_AWARE,
        "Cost-aware (most tokens per measured ms)",
        "the most expected tokens per measured ms",
        "specviz.drafters.cost_aware:make",
        adaptive=True,
    ),
    Choice(FIXED, "Fixed k", "k tokens every round", "specviz.drafters.length:fixed"),
    Choice(
        HEURISTIC,
        "Heuristic (transformers' +2/-1 schedule)",
        "transformers' +2/-1 schedule, a round stopping below a draft confidence",
        "specviz.drafters.length:heuristic",
        adaptive=True,
    ),
    default=COST_AWARE,
)

# What runs the models (lm.runtime): "auto" takes SPECVIZ_RUNTIME, else the one measured
# faster here (costs.runtime_choice). A runtime's factory is its loader, (plan, *, progress)
# -> ModelPair, which `lm.load_pair` calls.
RUNTIMES = Registry(
    "runtime",
    Choice(AUTO, "auto (the faster one here)", "SPECVIZ_RUNTIME, else the runtime measured faster on this machine"),
    Choice(
        TORCH,
        "torch",
        "transformers' modules in torch, the CPU's own precision (bf16 where native)",
        "specviz.lm.torch_runtime.loader:load_torch_pair",
        capabilities=frozenset({TREE_PASS, EARLY_EXIT_PASS, DEVICE_MAP, HF_GENERATE, BATCHED}),
        opens="specviz.lm.torch_runtime.lean:model_lm",  # its models are transformers' modules
    ),
    Choice(
        LLAMACPP,
        "llama.cpp",
        "the GGUF files as they are (Q4_K_M underneath), through llama-cpp-python",
        "specviz.lm.llamacpp_runtime.pair:load_llamacpp_pair",
        capabilities=frozenset({TREE_PASS}),
    ),
    default=AUTO,
)

# The target's precision on the torch runtime; lm.torch_runtime.devices maps each to a dtype.
PRECISIONS = Registry(
    "precision",
    Choice("auto", "auto", "bf16 on CUDA; on a CPU the faster of fp32 and bf16, measured once per machine"),
    Choice("float32", "float32", "fp32"),
    Choice("bfloat16", "bfloat16", "bf16"),
    Choice(INT8, "int8", "dynamic int8 weights, fp32 activations (a CPU only)"),
    default="auto",
)

# A pair whose draft has another tokenizer drafts through text (re-encoded, point masses)
# or on the vocabulary both share (q restricted and mapped); "auto" takes the pair's default.
VOCAB_METHODS = Registry(
    "vocab method",
    Choice("auto", "auto (the pair's default)", "the pair's default"),
    Choice(
        TEXT,
        "through text",
        "the draft's text re-encoded by the target's tokenizer, as point masses",
        phrase="through text",
        explained="the draft's tokens are turned into text and re-encoded with the target's tokenizer",
    ),
    Choice(
        INTERSECTION,
        "shared vocabulary",
        "q restricted to the tokens both vocabularies share, mapped",
        phrase="through the shared vocabulary",
        explained="the draft proposes only tokens both vocabularies have",
    ),
    default="auto",
)

MODES = Registry(
    "mode",
    Choice(SPECULATIVE, "Speculative", "draft, then verify in one target pass"),
    Choice(PLAIN, "Plain (target only)", "the target alone, one token per pass"),
    default=SPECULATIVE,
)

FORMATS = Registry(
    "output format",
    Choice(FREE_TEXT, "Free text", "no constraint"),
    Choice(JSON_SCHEMA, "JSON (schema)", "JSON that a JSON schema accepts (empty: any JSON object)"),
    Choice(REGEX, "Regular expression", "text that a regular expression matches whole"),
    Choice(CHOICE, "One of a list", "one of a list of strings: a JSON list, or one per line"),
    Choice(GRAMMAR, "Grammar", "a grammar in llguidance's Lark syntax, or llama.cpp's GBNF"),
    default=FREE_TEXT,
)


def method_phrase(method: object) -> str:
    """How the page says a draft with another tokenizer drafts by `method` ("through text"),
    "" for anything that names no method (auto, a missing or unknown value)."""
    return VOCAB_METHODS[method].phrase if method in VOCAB_METHODS else ""


def help_line(registry: Registry) -> str:
    """'name: help; ...' for a command line's --help."""
    return "; ".join(f"{e.name}: {e.help}" for e in registry)
