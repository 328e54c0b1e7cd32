"""transformers' own `generate`, as the bench's reference: plain decoding, assisted
generation with the draft model (its default schedule, or a constant k), and prompt lookup.

Every call gets the same prompt ids, the same stopping tokens and the same sampling settings
as specviz, so tokens/s compare like for like: a GenerationConfig is built from scratch
rather than taken from the model, whose file may carry its own top-p or repetition penalty.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
from transformers import GenerationConfig

# transformers' defaults for the assistant (generation/configuration_utils.py): up to 20
# drafted tokens a round, cut short where the draft's confidence falls under a threshold.
PROMPT_LOOKUP_TOKENS = 10


@dataclass
class HFRun:
    token_ids: list[int]  # new tokens only
    wall_s: float


def generation_config(*, max_new_tokens: int, temperature: float, top_k: int, top_p: float, eos_ids: list[int], pad_id: int | None) -> GenerationConfig:
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
) -> HFRun:
    """One timed `generate` call. `assistant_k` None keeps transformers' default schedule;
    a number makes the draft length constant (no confidence cut-off either)."""
    config = copy.deepcopy(config)
    kwargs = {}
    if prompt_lookup:
        config.prompt_lookup_num_tokens = prompt_lookup
    saved = None
    if assistant is not None:
        kwargs["assistant_model"] = assistant
        # The assistant's schedule lives on the assistant's own generation config.
        saved = copy.deepcopy(assistant.generation_config)
        if assistant_k is not None:
            assistant.generation_config.num_assistant_tokens = assistant_k
            assistant.generation_config.num_assistant_tokens_schedule = "constant"
            assistant.generation_config.assistant_confidence_threshold = 0.0
    attention = torch.ones_like(input_ids)
    device = input_ids.device
    torch.manual_seed(seed)
    try:
        _sync(device)
        t0 = time.perf_counter()
        out = target.generate(input_ids=input_ids, attention_mask=attention, generation_config=config, **kwargs)
        _sync(device)
        wall = time.perf_counter() - t0
    finally:
        if saved is not None:
            assistant.generation_config = saved
    return HFRun(token_ids=out[0, input_ids.shape[1] :].tolist(), wall_s=wall)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
