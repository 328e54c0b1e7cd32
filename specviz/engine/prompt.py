"""What the models are fed: the prompt as a user message in the chat template, or raw."""

from __future__ import annotations

import torch

from specviz.errors import UserError
from specviz.models.pair import ModelPair
from specviz.settings import GenerationSettings


def encode_prompt(pair: ModelPair, prompt: str, settings: GenerationSettings) -> list[int]:
    """Token ids of the prompt: wrapped as a user message by the tokenizer's chat template
    when it has one (and `settings.raw` is off), otherwise the text as-is."""
    tok = pair.tokenizer
    if not settings.raw and getattr(tok, "chat_template", None):
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tok(prompt)["input_ids"]
    if not ids:
        raise UserError("the prompt is empty: type something for the model to continue")
    return list(ids)


def stop_ids(pair: ModelPair) -> set[int]:
    """Token ids that end generation: the tokenizer's EOS and the target's generation config's."""
    ids: set[int] = set()
    for source in (getattr(pair.tokenizer, "eos_token_id", None), getattr(getattr(pair.target, "generation_config", None), "eos_token_id", None)):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple, torch.Tensor)):
            ids.update(int(i) for i in source)
    return {i for i in ids if 0 <= i < pair.vocab_size}
