"""What the models are fed: the prompt as a user message in the chat template, or raw."""

from __future__ import annotations

import torch

from specviz.errors import UserError
from specviz.lm.pair import ModelPair
from specviz.settings import GenerationSettings, check_prompt


def encode_prompt(pair: ModelPair, prompt: str | list[dict], settings: GenerationSettings) -> list[int]:
    """Token ids of the prompt: wrapped as a user message by the tokenizer's chat template
    when it has one (and `settings.raw` is off), otherwise the text as-is. A conversation
    (`settings.check_prompt`) always goes through the chat template."""
    prompt = check_prompt(prompt)
    tok = pair.tokenizer
    has_template = bool(getattr(tok, "chat_template", None))
    if isinstance(prompt, list) and (settings.raw or not has_template):
        raise UserError(
            "a conversation (a list of messages) is rendered by the chat template: "
            + ("drop raw" if has_template else f"{pair.name}'s tokenizer has none, so send one prompt")
        )
    if not settings.raw and has_template:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tok(prompt)["input_ids"]
    if not ids:
        raise UserError("the prompt is empty: type something for the model to continue")
    window = context_window(pair)
    if window is not None and len(ids) + settings.max_new_tokens > window:
        raise UserError(
            f"the prompt is {len(ids):,} tokens; with {settings.max_new_tokens:,} new tokens that is more than the "
            f"{window:,}-token context window of {pair.name}. The prompt was not run: shorten it or ask for fewer new tokens"
        )
    return list(ids)


def context_window(pair: ModelPair) -> int | None:
    """The most positions every model of the pair can attend over (None if none says)."""
    sizes = [_window(m) for m in (pair.target, pair.draft) if m is not None]
    sizes = [s for s in sizes if isinstance(s, int) and s > 0]
    return min(sizes) if sizes else None


def stop_ids(pair: ModelPair) -> set[int]:
    """Token ids that end generation: the tokenizer's EOS and the target's own."""
    return {i for i in model_stop_ids(pair.tokenizer, pair.target) if 0 <= i < pair.vocab_size}


def model_stop_ids(tokenizer, model) -> set[int]:
    """A model's end-of-generation ids: its tokenizer's EOS and the model's own (a torch
    model's generation config, another runtime's model's `stop_ids`)."""
    if hasattr(model, "stop_ids"):
        own = list(model.stop_ids)
    else:
        own = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids: set[int] = set()
    for source in (getattr(tokenizer, "eos_token_id", None), own):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple, set, frozenset, torch.Tensor)):
            ids.update(int(i) for i in source)
    return ids


def _window(model) -> int | None:
    """A torch model's configured positions, or what another runtime's model says (llama.cpp:
    its context's size)."""
    if hasattr(model, "context_window"):
        return model.context_window
    return getattr(model.config, "max_position_embeddings", None)
