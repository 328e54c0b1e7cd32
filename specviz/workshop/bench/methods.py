"""The decoding methods the bench compares, and how to run one of them once.

Names: `sv-*` run specviz's engine, `hf-*` run transformers' `generate`, `lc-*` run
llama-cpp-python's own `Llama.generate` (on a pair loaded on the llama.cpp runtime).

    sv-plain              target alone
    sv-k{K}               speculative, draft model, fixed k
    sv-adaptive           speculative, draft model, the cost-aware policy (the page's default;
                          events recorded in full)
    sv-adaptive-min       the same with events reduced to the minimum: the event stream's cost
    sv-heuristic          speculative, draft model, transformers' +2/-1 schedule
    sv-tree{N}x{B}        speculative, a token tree of N nodes, at most B children each, from the draft model
    sv-{drafter}          speculative with any other drafter of `choices.DRAFTERS` (lookup,
                          early-exit, suffix, lookahead, ...), cost-aware; a suffix run starts
                          from a fresh structure: its corpus is the prompt and its own output
    sv-text               a draft with another tokenizer, drafting through text, cost-aware
    sv-intersection       the same, drafting on the shared vocabulary, cost-aware
    hf-plain              transformers, target alone
    hf-assisted           transformers assisted generation, its default schedule
    hf-assisted-k{K}      the same with a constant k
    hf-universal          transformers assisted generation with a draft of another tokenizer
                          (`assistant_tokenizer=`), its default schedule: see run_transformers
    hf-universal-k{K}     the same with a constant k
    hf-lookup             transformers prompt lookup (10 tokens)
    lc-plain              llama-cpp-python, target alone, over the same GGUF file and threads; on a
                          prompt with an output format, under its grammar (`LlamaGrammar`)
    lc-lookup             llama-cpp-python with LlamaPromptLookupDecoding (10 tokens), its only drafter
    ll-spec-k{K}          llama.cpp's own llama-speculative-simple with the draft model, draft max K, greedy
                          (built once by scripts/build_llamacpp_tools.sh; skipped, saying so, until then)
    ll-ngram-{type}       the same tool with one of llama.cpp's own n-gram drafters, no draft model
                          (`--spec-type ngram-simple`, `ngram-map-k`, `ngram-map-k4v`, `ngram-mod`,
                          `ngram-cache`; llamacpp_tools.NGRAM_TYPES), greedy
    hf-...-gathered       any hf-plain / hf-assisted* / hf-universal* run with its LM heads fed
                          rows of their own: transformers as shipped slices the last position
                          as a strided view, and on some CPUs (this one, in bf16) the LM head
                          then takes a slow path at every prefill (see hf_baselines.gathered_heads).
                          The speed goals are against transformers as shipped; the gathered
                          runs show how much of a lead that slow path is.
    hf-...-packed         the same runs with the models' linear layers computing through the
                          oneDNN-packed weights specviz's own loop uses (lm/torch_runtime/packed.py,
                          hf_baselines.packed_layers): how much of a lead is the kernel alone.

The cross-tokenizer methods (sv-text, sv-intersection, hf-universal*) need a pair whose draft
has its own tokenizer, and hf-assisted* and sv-tree* need one whose draft shares the
target's: `check_pair` refuses the others before anything runs. sv-k{K}, sv-adaptive and
sv-heuristic run on either (on a cross-tokenizer pair with the pair's default vocab method).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from specviz.run_stats import position_stats, rounds_of
from specviz.workshop.bench import hf_baselines
from specviz.workshop.bench.llamacpp_tools import NGRAM_TYPES
from specviz.choices import (
    DRAFTERS,
    FIXED,
    HEURISTIC,
    HF_GENERATE,
    INTERSECTION,
    LLAMACPP,
    MODEL,
    PLAIN,
    POLICIES,
    SPECULATIVE,
    TEXT,
    TORCH,
    TREE,
)
from specviz.errors import UserError
from specviz.grammar.formats import check_output, parse
from specviz.settings import GenerationSettings
from specviz.lm.timing import sync

FAMILY_NAMES = {"sv": "specviz", "hf": "transformers", "lc": "llama-cpp-python", "ll": "llama.cpp"}
GATHERED = "-gathered"
PACKED = "-packed"
# What a transformers method's name may end in: a variant with one of specviz's fixes.
VARIANTS = {GATHERED: "gathered", PACKED: "packed"}


@dataclass(frozen=True)
class Method:
    name: str
    family: str  # "sv", "hf", "lc" or "ll"
    # plain | speculative | lookup | early-exit | suffix | lookahead | assisted | universal | tree | a llama.cpp n-gram type
    kind: str
    k: int | None = None  # fixed draft length; None: adaptive / the library's default schedule
    tree: tuple[int, int] | None = None  # specviz token tree: (nodes, width)
    record: str = "full"  # specviz only: "full" or "minimal" events
    policy: str = POLICIES.default  # specviz's draft-length policy when k is None
    vocab_method: str | None = None  # specviz, a draft with another tokenizer: "text" or "intersection"
    gathered: bool = False  # transformers only: LM heads fed rows of their own (hf_baselines.gathered_heads)
    packed: bool = False  # transformers only: linear layers through packed weights (hf_baselines.packed_layers)

    @property
    def needs_draft(self) -> bool:
        if self.kind in DRAFTERS:
            return DRAFTERS[self.kind].needs_draft
        return self.kind in (SPECULATIVE, "assisted", "universal")

    @property
    def cross_tokenizer(self) -> bool:
        """Runs only on a pair whose draft has its own tokenizer."""
        return self.kind == "universal" or self.vocab_method is not None


@dataclass
class Sample:
    """One timed run of one method on one prompt."""

    token_ids: list[int]
    wall_s: float
    stats: dict[str, Any] = field(default_factory=dict)
    trace: Any = None  # a specviz run's whole trace, saved to --out/traces for the page

    @property
    def new_tokens(self) -> int:
        """Tokens decoded: past the limit where a tool's last round ran over ("decoded"),
        though only those up to it are kept to compare."""
        return int(self.stats.get("decoded", len(self.token_ids)))

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def record(self) -> dict[str, Any]:
        """What bench.json keeps of the run (not the trace, which goes to its own file)."""
        return {**{k: getattr(self, k) for k in RECORDED}, **self.stats}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> "Sample":
        stats = {k: v for k, v in d.items() if k not in RECORDED}
        return cls(token_ids=list(d["token_ids"]), wall_s=float(d["wall_s"]), stats=stats)


# The methods named by a fixed draft length after their prefix: (family, kind).
WITH_K = {
    "sv-k": ("sv", SPECULATIVE),
    "hf-assisted-k": ("hf", "assisted"),
    "hf-universal-k": ("hf", "universal"),
    "ll-spec-k": ("ll", SPECULATIVE),
}
# A sample's own fields in bench.json, beside its method's stats.
RECORDED = ("tokens_per_s", "wall_s", "new_tokens", "token_ids")


def default_methods(ks: list[int], *, cross_tokenizer: bool = False, runtime: str = TORCH) -> list[str]:
    """The methods a run compares when --methods is not given; for a pair whose draft has
    another tokenizer, transformers' universal assisted generation and the two vocab methods
    take the place of same-tokenizer assisted generation and the tree; on the llama.cpp
    runtime llama-cpp-python's own plain and prompt-lookup decoding are the references."""
    specviz = ["sv-plain", *[f"sv-k{k}" for k in ks]]
    if runtime == LLAMACPP:
        return ["lc-plain", "lc-lookup", *specviz, "sv-adaptive", "sv-lookup", "sv-suffix", "sv-lookahead"]
    if cross_tokenizer:
        universal = [f"hf-universal-k{k}" for k in ks]
        return ["hf-plain", "hf-universal", *universal, *specviz, "sv-text", "sv-intersection"]
    assisted = ["hf-assisted", *[f"hf-assisted-k{k}" for k in ks], "hf-lookup"]
    others = ["sv-adaptive", "sv-adaptive-min", "sv-lookup", "sv-early-exit", "sv-suffix", "sv-lookahead"]
    return ["hf-plain", *assisted, *specviz, *others]


def drafter_methods() -> tuple[str, ...]:
    """The drafters that are a bench method of their own, `sv-<name>`: all but the draft
    model's chain and tree, whose methods name their k (sv-k<K>, sv-adaptive) or tree
    (sv-tree<N>x<B>)."""
    return tuple(d for d in DRAFTERS.names if d not in (MODEL, TREE))


def variant(name: str) -> str:
    """The variant a method's name ends in (GATHERED or PACKED), or "" for transformers as shipped."""
    return next((v for v in VARIANTS if name.endswith(v)), "")


def parse_method(name: str) -> Method:
    suffix = variant(name)
    base = name.removesuffix(suffix)
    if suffix and base.startswith("hf-") and base != "hf-lookup" and not variant(base):
        return replace(parse_method(base), name=name, **{VARIANTS[suffix]: True})
    fixed = {
        "sv-plain": Method(name, "sv", PLAIN),
        "sv-adaptive": Method(name, "sv", SPECULATIVE),
        "sv-adaptive-min": Method(name, "sv", SPECULATIVE, record="minimal"),
        "sv-heuristic": Method(name, "sv", SPECULATIVE, policy=HEURISTIC),
        **{f"sv-{d}": Method(name, "sv", d) for d in drafter_methods()},
        "sv-text": Method(name, "sv", SPECULATIVE, vocab_method=TEXT),
        "sv-intersection": Method(name, "sv", SPECULATIVE, vocab_method=INTERSECTION),
        "hf-plain": Method(name, "hf", PLAIN),
        "hf-assisted": Method(name, "hf", "assisted"),
        "hf-universal": Method(name, "hf", "universal"),
        "hf-lookup": Method(name, "hf", "lookup"),
        "lc-plain": Method(name, "lc", PLAIN),
        "lc-lookup": Method(name, "lc", "lookup"),
    }
    if name in fixed:
        return fixed[name]
    t = re.fullmatch(r"sv-tree(\d+)x(\d+)", name)
    if t and 1 <= int(t.group(1)) <= 64 and 1 <= int(t.group(2)) <= 8:
        return Method(name, "sv", TREE, tree=(int(t.group(1)), int(t.group(2))))
    if name.removeprefix("ll-") in NGRAM_TYPES:
        return Method(name, "ll", name.removeprefix("ll-"))
    m = re.fullmatch(f"({'|'.join(WITH_K)})(\\d+)", name)
    if m and 1 <= int(m.group(2)) <= 16:
        return Method(name, *WITH_K[m.group(1)], k=int(m.group(2)))
    raise UserError(
        f"unknown method {name!r}: use sv-plain, sv-k<K>, sv-adaptive, sv-adaptive-min, sv-heuristic, "
        f"{', '.join('sv-' + d for d in drafter_methods())}, sv-tree<N>x<B>, sv-text, sv-intersection, hf-plain, hf-assisted, hf-assisted-k<K>, "
        "hf-universal, hf-universal-k<K>, hf-lookup, lc-plain, lc-lookup, ll-spec-k<K> or "
        f"{', '.join('ll-' + t for t in NGRAM_TYPES)} (K from 1 to 16, N to 64, B to 8); "
        f"a transformers method other than hf-lookup may end in {GATHERED} or {PACKED}"
    )


def check_pair(pair, methods: list[Method]) -> None:
    """Refuse, before anything runs, a method that cannot run on this pair: drafting with
    another tokenizer needs a draft that has one, and the others that need the draft's ids to
    be the target's need a draft that shares the target's tokenizer."""
    if any(m.needs_draft for m in methods) and pair.draft is None:
        raise UserError(
            f"pair {pair.name} has no draft model: drop the draft-model methods "
            "(sv-k*, sv-adaptive*, sv-text, sv-intersection, sv-tree*, hf-assisted*, hf-universal*)"
        )
    from specviz.lm.runtime import missing

    families = {m.family for m in methods}
    if "hf" in families and missing(pair.runtime, HF_GENERATE):
        raise UserError(f"the hf-* methods: {missing(pair.runtime, HF_GENERATE)}; run them with --runtime torch")
    if families & {"lc", "ll"} and pair.runtime != LLAMACPP:
        raise UserError(
            "the lc-* and ll-* methods run llama.cpp on the pair's GGUF files: run them with --runtime llama.cpp"
        )
    cross = pair.cross_tokenizer
    if cross:
        same_only = [m.name for m in methods if m.kind == "assisted" or m.kind == TREE]
        if same_only:
            raise UserError(
                f"pair {pair.name}'s draft has its own tokenizer: {', '.join(same_only)} need a draft that shares the target's tokenizer; "
                "for transformers' assisted generation across tokenizers use hf-universal (or hf-universal-k<K>)"
            )
    else:
        cross_only = [m.name for m in methods if m.cross_tokenizer]
        if cross_only:
            raise UserError(
                f"pair {pair.name}'s draft shares the target's tokenizer: {', '.join(cross_only)} draft across two tokenizers; "
                "use hf-assisted (or hf-assisted-k<K>) and sv-adaptive (or sv-k<K>) instead"
            )


def sv_settings(method: Method, base: GenerationSettings, k_max: int) -> GenerationSettings:
    """The specviz settings one method runs with; `base` holds temperature, length, seed."""
    if method.kind == PLAIN:
        return replace(base, mode=PLAIN)
    if method.kind == TREE:
        nodes, width = method.tree
        return replace(base, mode=SPECULATIVE, drafter=TREE, k=k_max, policy=FIXED, tree_nodes=nodes, tree_width=width)
    drafter = MODEL if method.kind == SPECULATIVE else method.kind
    if method.vocab_method is not None:
        base = replace(base, vocab_method=method.vocab_method)
    if method.k is not None:
        return replace(base, mode=SPECULATIVE, drafter=drafter, k=method.k, policy=FIXED)
    return replace(base, mode=SPECULATIVE, drafter=drafter, k=k_max, policy=method.policy)


def run_specviz(pair, prompt: str, method: Method, settings: GenerationSettings) -> Sample:
    from specviz.engine.generation import run

    sync(pair.device)
    t0 = time.perf_counter()
    trace = run(pair, prompt, settings, record=method.record)
    sync(pair.device)
    wall = time.perf_counter() - t0
    return Sample(token_ids=list(trace.token_ids), wall_s=wall, stats=trace_stats(trace), trace=trace)


def trace_stats(trace) -> dict[str, Any]:
    """What the bench reports from a specviz run: acceptance, tokens per round, T, D, k."""
    s = trace.summary
    rounds = rounds_of(trace.events)
    stats = {"stop_reason": s.stop_reason, "engine_wall_s": s.wall_s, "target_ms": s.target_ms, "draft_ms": s.draft_ms}
    if s.format_check:  # under an output format: the answer checked, forced tokens, the masks' cost
        stats.update(format_check=s.format_check, grammar_ms=s.grammar_ms)
        stats.update(forced=s.forced, forced_accepted=s.forced_accepted)
    if trace.mode == SPECULATIVE and s.rounds:
        stats.update(
            rounds=s.rounds,
            tokens_per_round=s.tokens_per_round,
            mean_k=sum(r.k for r in rounds) / len(rounds) if rounds else None,
        )
        if s.drafted:  # acceptance is undefined when nothing was drafted (lookup found no match)
            stats.update(acceptance=s.acceptance_rate, mean_overlap=s.mean_overlap)
            ps = position_stats(trace.events)
            stats["by_position"] = {"reached": ps.reached.tolist(), "accepted": ps.accepted.tolist()}
    else:
        stats["draft_ms"] = None
    return stats


def stop_reason(new_tokens: int, max_new_tokens: int, *, ended_on_stop: bool) -> str:
    """Why a reference run ended, in the engine's words. The engine looks for a stop token
    before it looks at the limit (Decoder.check_stop), so a run that ended on one is "eos"
    even where that token is the last the limit allows; else a run that reached the limit is
    "max_new_tokens". `ended_on_stop`: a stop token within the limit ended it. A run short
    of the limit with none ended at an end of text its library knows: "eos" too."""
    return "eos" if ended_on_stop or new_tokens < max_new_tokens else "max_new_tokens"


def run_transformers(pair, input_ids: torch.Tensor, method: Method, config, seed: int) -> Sample:
    """One timed transformers `generate` call.

    hf-universal* passes `tokenizer=` (the target's) and `assistant_tokenizer=` (the draft's)
    beside `assistant_model=`, and transformers 5.24 picks the candidate generator by
    `do_sample` (GenerationMixin._get_candidate_generator, generation/utils.py):

    - greedy: AssistedCandidateGeneratorDifferentTokenizers (generation/candidate_generator.py),
      universal assisted generation: the draft's text is re-encoded in the target's tokens with
      a look-behind and verified as plain candidates, as specviz's `sv-text` does;
    - sampling: UniversalSpeculativeDecodingGenerator, token-level intersection (arXiv
      2502.05202): the draft's logits restricted to the tokens both vocabularies have, mapped
      to target ids and verified by speculative sampling, as specviz's `sv-intersection` does.
      transformers builds an AssistantToTargetTranslator for it, which prunes the draft's
      output head to the shared tokens; hf_baselines builds it outside the timed call and
      puts the draft back afterwards (see hf_baselines.universal_draft).

    Assisted runs also count the target's forward passes: each is one round, so
    tokens_per_round compares with specviz's."""
    kwargs: dict[str, Any] = {}
    if method.kind == "assisted":
        kwargs = dict(assistant=pair.draft, assistant_k=method.k)
    elif method.kind == "universal":
        kwargs = dict(
            assistant=pair.draft,
            assistant_k=method.k,
            tokenizer=pair.tokenizer,
            assistant_tokenizer=pair.draft_tokenizer,
        )
    elif method.kind == "lookup":
        kwargs = dict(prompt_lookup=hf_baselines.PROMPT_LOOKUP_TOKENS)
    r = hf_baselines.generate(
        pair.target, input_ids, config, seed=seed, gathered=method.gathered, packed=method.packed, **kwargs
    )
    ended = bool(r.token_ids) and r.token_ids[-1] in config.eos_token_id  # generate stops on these (eos_ids)
    stats: dict[str, Any] = {"stop_reason": stop_reason(len(r.token_ids), config.max_new_tokens, ended_on_stop=ended)}
    if method.kind in ("assisted", "universal", "lookup") and r.target_calls:
        stats.update(rounds=r.target_calls, tokens_per_round=len(r.token_ids) / r.target_calls)
    if r.generator:
        stats["hf_generator"] = r.generator
    return Sample(token_ids=r.token_ids, wall_s=r.wall_s, stats=stats)


def run_llamacpp(pair, input_ids: torch.Tensor, method: Method, settings: GenerationSettings) -> Sample:
    """One timed llama-cpp-python generation on the pair's target file (`llamacpp_baselines`)."""
    from specviz.workshop.bench import llamacpp_baselines
    from specviz.lm.prompt import stop_ids

    llm = llamacpp_baselines.model(pair.target.path, pair.target.threads, lookup=method.kind == "lookup")
    stops = stop_ids(pair)
    ids, wall_s = llamacpp_baselines.generate(
        llm,
        input_ids.tolist(),
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        seed=settings.seed,
        stop_ids=stops,
        grammar=llamacpp_baselines.grammar(settings.output_format, settings.output_spec),
    )
    stop = stop_reason(len(ids), settings.max_new_tokens, ended_on_stop=bool(ids) and ids[-1] in stops)
    stats: dict[str, Any] = {"stop_reason": stop}
    fmt = parse(settings.output_format, settings.output_spec)
    if fmt is not None:  # its answer checked as specviz's are
        text = pair.tokenizer.decode([t for t in ids if t not in stops])
        stats["format_check"] = check_output(fmt, text, stop)
    return Sample(token_ids=ids, wall_s=wall_s, stats=stats)


def run_llamacpp_tool(pair, input_ids: torch.Tensor, method: Method, settings: GenerationSettings) -> Sample:
    """One llama-speculative-simple run on the pair's files (`llamacpp_tools`), greedy only:
    with the draft model (ll-spec-k<K>) or one of llama.cpp's n-gram drafters (ll-ngram-*)."""
    from specviz.workshop.bench import llamacpp_tools

    if settings.temperature != 0:
        raise UserError(f"{method.name} runs greedy only here: drop it from a sampling bench")
    text = pair.tokenizer.decode(input_ids.tolist())
    # an n-gram type drafts from the context alone; the draft model up to k tokens
    drafting = {"spec_type": method.kind} if method.kind in NGRAM_TYPES else {"draft_max": method.k}
    draft = None if method.kind in NGRAM_TYPES else pair.draft.path
    r = llamacpp_tools.speculative_simple(
        pair.target.path, draft, text, max_new_tokens=settings.max_new_tokens, threads=pair.target.threads, **drafting
    )
    # The tool keeps every token its last round accepted, past -n: its rate counts them all,
    # its output is compared up to the limit every other method stops at.
    ids = pair.tokenizer(r["text"], add_special_tokens=False)["input_ids"][: r["new_tokens"]]
    # Its text leaves out the end-of-generation token but its count holds it; without one it
    # runs until the count is past -n, so a count within the limit ended on one.
    ended = r["new_tokens"] <= settings.max_new_tokens
    stats = {
        "stop_reason": stop_reason(r["new_tokens"], settings.max_new_tokens, ended_on_stop=ended),
        "acceptance": r["accepted"] / r["drafted"] if r["drafted"] else None,
        "drafted": r["drafted"],
        "decoded": len(ids),
    }
    ids = ids[: settings.max_new_tokens]
    return Sample(token_ids=ids, wall_s=r["wall_s"], stats=stats)
