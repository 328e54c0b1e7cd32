"""transformers' own `generate`, as the bench's reference: plain decoding, assisted
generation with the draft model (its default schedule, or a constant k), assisted generation
with a draft that has its own tokenizer (`assistant_tokenizer=`), and prompt lookup.

Every call gets the same prompt ids, the same stopping tokens and the same sampling settings
as specviz, so tokens/s compare like for like: a GenerationConfig is built from scratch
rather than taken from the model, whose file may carry its own top-p or repetition penalty.
"""

from __future__ import annotations

import copy
import time
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
from transformers import GenerationConfig
from specviz.lm.timing import sync

# Tokens prompt lookup drafts a round (hf-lookup's prompt_lookup_num_tokens; lc-lookup drafts as many).
PROMPT_LOOKUP_TOKENS = 10


@dataclass
class HFRun:
    token_ids: list[int]  # new tokens only
    wall_s: float
    target_calls: int = 0  # the target's forward passes: one per round in assisted generation
    generator: str | None = None  # the candidate generator transformers ran, for assisted runs


def generation_config(
    *, max_new_tokens: int, temperature: float, top_k: int, top_p: float, eos_ids: list[int], pad_id: int | None
) -> GenerationConfig:
    sampling = temperature > 0
    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=sampling,
        temperature=temperature if sampling else None,
        top_k=(top_k or None) if sampling else None,
        top_p=top_p if sampling and top_p < 1 else None,
        repetition_penalty=None,
        eos_token_id=eos_ids,
        pad_token_id=pad_id if pad_id is not None else eos_ids[0],
    )


@torch.inference_mode()
def generate(
    target: torch.nn.Module,
    input_ids: torch.Tensor,
    config: GenerationConfig,
    *,
    seed: int = 0,
    assistant: torch.nn.Module | None = None,
    assistant_k: int | None = None,
    prompt_lookup: int | None = None,
    gathered: bool = False,
    packed: bool = False,
    tokenizer=None,
    assistant_tokenizer=None,
) -> HFRun:
    """One timed `generate` call. `assistant_k` None keeps transformers' default schedule;
    a number makes the draft length constant (no confidence cut-off either).

    `tokenizer` (the target's) and `assistant_tokenizer` (the draft's), both or neither, make
    it transformers' generation with a draft of another tokenizer: greedy runs
    AssistedCandidateGeneratorDifferentTokenizers, sampling UniversalSpeculativeDecodingGenerator
    (see `universal_draft` for what the latter does to the draft model).

    `gathered` feeds the LM heads rows of their own for the call (`gathered_heads`);
    `packed` runs the linear layers through packed weights for the call (`packed_layers`)."""
    if (tokenizer is None) != (assistant_tokenizer is None) or (assistant_tokenizer is not None and assistant is None):
        raise ValueError("a draft with its own tokenizer needs assistant, tokenizer and assistant_tokenizer together")
    config = copy.deepcopy(config)
    kwargs, generator, saved = {}, None, None
    if prompt_lookup:
        config.prompt_lookup_num_tokens = prompt_lookup
        generator = "PromptLookupCandidateGenerator"
    if assistant is not None:
        kwargs, generator = _assisted(config, assistant, tokenizer, assistant_tokenizer)
        saved = _schedule(assistant, assistant_k)
    attention = torch.ones_like(input_ids)
    device = input_ids.device
    calls = [0]
    hook = target.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    usd = assistant_tokenizer is not None and config.do_sample
    try:
        with (
            universal_draft(target, assistant, tokenizer, assistant_tokenizer) if usd else nullcontext(),
            gathered_heads([target, assistant]) if gathered else nullcontext(),
            packed_layers([target, assistant]) if packed else nullcontext(),
        ):
            torch.manual_seed(seed)
            sync(device)
            t0 = time.perf_counter()
            out = target.generate(input_ids=input_ids, attention_mask=attention, generation_config=config, **kwargs)
            sync(device)
            wall = time.perf_counter() - t0
    finally:
        hook.remove()
        if saved is not None:
            assistant.generation_config = saved
    return HFRun(
        token_ids=out[0, input_ids.shape[1] :].tolist(), wall_s=wall, target_calls=calls[0], generator=generator
    )


def _assisted(config: GenerationConfig, assistant, tokenizer, assistant_tokenizer) -> tuple[dict, str]:
    """generate's arguments for assisted generation, and the candidate generator it picks."""
    kwargs = {"assistant_model": assistant}
    if assistant_tokenizer is None:
        return kwargs, "AssistedCandidateGenerator"
    kwargs.update(tokenizer=tokenizer, assistant_tokenizer=assistant_tokenizer)
    return (
        kwargs,
        "UniversalSpeculativeDecodingGenerator"
        if config.do_sample
        else "AssistedCandidateGeneratorDifferentTokenizers",
    )


def _schedule(assistant: torch.nn.Module, k: int | None) -> GenerationConfig:
    """Set the assistant's draft length, which lives on its own generation config; returns the
    config to put back after the call. None keeps transformers' defaults for the assistant
    (generation/configuration_utils.py): up to 20 drafted tokens a round, cut short where the
    draft's confidence falls under a threshold."""
    saved = copy.deepcopy(assistant.generation_config)
    if k is not None:  # constant, with no confidence cut-off either
        assistant.generation_config.num_assistant_tokens = k
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        assistant.generation_config.assistant_confidence_threshold = 0.0
    return saved


@contextmanager
def gathered_heads(models: list[torch.nn.Module | None]):
    """For one call, each model's output head gets its input as rows of their own.

    transformers' `generate` asks for the last position's logits with an int
    `logits_to_keep`, and the model slices `hidden[:, -1:, :]`: a view with the whole
    sequence's batch stride. On some CPUs a bf16 head over such a view goes through a batched
    product that copies the weight first, at every `generate` call (docs/BENCHMARKS.md), and in assisted
    generation again at every round for a bf16 draft (whose catch-up over two or more new
    tokens is a prefill). specviz's passes gather those rows (lm/torch_runtime/keep.py); this gives transformers
    the same, so that a comparison can show the slow path's share apart from the rest."""
    from specviz.lm.torch_runtime.keep import own_storage

    hooks = []
    try:
        for model in models:
            head = model.get_output_embeddings() if model is not None else None
            if isinstance(head, torch.nn.Module):
                hooks.append(
                    head.register_forward_pre_hook(
                        lambda _module, args: (own_storage(args[0]), *args[1:]), prepend=True
                    )
                )
        yield
    finally:
        for h in hooks:
            h.remove()


@contextmanager
def packed_layers(models: list[torch.nn.Module | None]):
    """For one call, each model's linear layers compute through the oneDNN-packed copies of
    their weights that specviz's lean loop multiplies by (`lm.torch_runtime.packed`), where the model
    has them: transformers' `generate` with specviz's kernel, so that a comparison can show
    how much of a lead is the kernel and how much the loop and the draft-length policy."""
    from specviz.lm.torch_runtime.packed import packed_linears

    swapped: list[tuple[torch.nn.Module, object]] = []
    try:
        for model in models:
            for module, product in ((packed_linears(model) or {}) if model is not None else {}).items():
                swapped.append((module, module.__dict__.get("forward")))
                module.forward = product
        yield
    finally:
        for module, before in swapped:
            if before is None:
                del module.forward
            else:
                module.forward = before


@dataclass
class _UniversalDraft:
    translator: object  # transformers' AssistantToTargetTranslator for this draft
    own: tuple[torch.nn.Module, torch.nn.Module]  # the draft's input and output embeddings
    pruned: tuple[torch.nn.Module, torch.nn.Module]  # the translator's versions of them


_UNIVERSAL: "weakref.WeakKeyDictionary[torch.nn.Module, _UniversalDraft]" = weakref.WeakKeyDictionary()


@contextmanager
def universal_draft(target: torch.nn.Module, draft: torch.nn.Module, tokenizer, draft_tokenizer):
    """The draft as transformers' UniversalSpeculativeDecodingGenerator wants it, for one call.

    transformers 5.24 (GenerationMixin._get_candidate_generator) takes the translator from
    AssistantVocabTranslatorCache, keyed by the two tokenizers, building it on first use with
    `assistant_prune_lm_head=True`: that swaps the draft's output head for one over the shared
    tokens only and its input embeddings for a remapping wrapper, in place and for good.
    specviz's runs share the draft model, so here the translator is built once per draft
    outside the timed call (transformers would reuse it across calls too), put in that cache
    for the call, and the draft's own layers are put back after it.

    A head that is not a plain Linear (the int8 draft's quantized one) cannot be pruned
    (transformers' prune_linear_layer reads `.weight`); its translator suppresses the
    draft-only tokens with a logits processor instead, which transformers does itself when
    pruning is off."""
    from transformers.generation.candidate_generator import AssistantToTargetTranslator, AssistantVocabTranslatorCache

    state = _UNIVERSAL.get(draft)
    if (
        state is None
        or state.translator._target_tokenizer is not tokenizer
        or state.translator._assistant_tokenizer is not draft_tokenizer
    ):
        own = (draft.get_input_embeddings(), draft.get_output_embeddings())
        prunable = type(own[1]) is torch.nn.Linear
        translator = AssistantToTargetTranslator(
            tokenizer,
            draft_tokenizer,
            target.config.get_text_config().vocab_size,
            assistant_model=draft,
            assistant_prune_lm_head=prunable,
        )
        state = _UniversalDraft(translator, own, (draft.get_input_embeddings(), draft.get_output_embeddings()))
        _UNIVERSAL[draft] = state
    cache = AssistantVocabTranslatorCache._cache
    if tokenizer not in cache:
        cache[tokenizer] = weakref.WeakKeyDictionary()
    previous = cache[tokenizer].get(draft_tokenizer)
    cache[tokenizer][draft_tokenizer] = state.translator
    draft.set_input_embeddings(state.pruned[0])
    draft.set_output_embeddings(state.pruned[1])
    try:
        yield state.translator
    finally:
        draft.set_input_embeddings(state.own[0])
        draft.set_output_embeddings(state.own[1])
        if previous is None:
            cache[tokenizer].pop(draft_tokenizer, None)
        else:
            cache[tokenizer][draft_tokenizer] = previous
