"""`load_pair(spec)`: a ModelPair ready on the runtime asked for.

What a user typed becomes a plan of model files (`models.catalogue.sources.resolve`); the
runtime's `RUNTIMES` entry names the loader that makes the pair from it: torch's
`torch_runtime/loader.py`, llama.cpp's `llamacpp_runtime/pair.py`. What both loaders do alike
is here: the plan's models by role, the pair assembled from them, a model file's failure in words.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from specviz.choices import RUNTIMES, TORCH
from specviz.lm.pair import ModelPair
from specviz.models.alignment.vocab import check_vocab, head_rows, shared_vocab_size
from specviz.models.catalogue.presets import DEFAULT_PAIR
from specviz.models.catalogue.sources import ModelRef, Plan, resolve
from specviz.models.files.convert import bundled_folder, custom_gguf_folder
from specviz.models.progress import Progress


def load_pair(
    spec: str | tuple = DEFAULT_PAIR,
    *,
    with_draft: bool = True,
    progress: Progress | None = None,
    runtime: str = TORCH,
    **torch_options: Any,
) -> ModelPair:
    """Load (or return the already loaded) pair named by `spec`.

    `spec`: a preset name, `"DRAFT -> TARGET"`, `(draft, target)`, or one model for a target
    without a draft (see `sources.py`). `with_draft=False` loads only the target (draft None).
    `progress(fraction, message)` is called as the load advances. `torch_options` (device,
    dtype, int8_draft, device_map, max_memory) are the torch runtime's
    (`torch_runtime.loader.load_torch_pair`); another runtime loads the files as they are.
    """
    plan = resolve(spec, with_draft=with_draft)
    return RUNTIMES[runtime].make(plan, progress=progress, **(torch_options if runtime == TORCH else {}))


def roles(plan: Plan) -> list[tuple[str, ModelRef]]:
    """The plan's models by role, the target first (a draft may then reuse what it loaded)."""
    return [(role, ref) for role, ref in (("target", plan.target), ("draft", plan.draft)) if ref is not None]


def converted_folder(ref: ModelRef) -> Path:
    """Where a GGUF model (bundled or a user's file) is cached as a transformers folder."""
    return bundled_folder(ref.bundled) if ref.kind == "bundled" else custom_gguf_folder(Path(ref.location))


def assemble(plan: Plan, tokenizers: dict, models: dict, info: dict, start: float, **runtime: Any) -> ModelPair:
    """The pair of `plan` from its loaded models and their tokenizers (by role): the vocabulary
    the two share, or the map between two tokenizers (its summary in `info["vocab"]`).
    `runtime`: the ModelPair fields its runtime sets (device, dtype, runtime, precision_choice)."""
    target, draft = models["target"], models.get("draft")
    target_tok, draft_tok, vmap = tokenizers["target"], tokenizers.get("draft"), None
    if draft is not None and draft_tok is not target_tok:
        vmap, message = check_vocab(
            draft_tok,
            target_tok,
            plan.draft.label,
            plan.target.label,
            draft_rows=head_rows(draft),
            target_rows=head_rows(target),
        )
        info["vocab"] = {**vmap.summary(), "message": message}
        if vmap.identical:
            vmap = None
    elif draft is not None:
        info["vocab"] = {"method": "same", "reason": "the draft uses the target's tokenizer", "identical": True}
    if vmap is None:
        vocab = shared_vocab_size(target_tok, target, draft, plan.name)
    else:
        # A draft with its own tokenizer: the pair works in the target's ids; the draft's
        # head must still score every id of its own tokenizer.
        vocab = shared_vocab_size(target_tok, target, None, plan.name)
        shared_vocab_size(draft_tok, draft, None, f"{plan.name} (draft)")
    return ModelPair(
        name=plan.name,
        tokenizer=target_tok,
        target=target,
        draft=draft,
        vocab_size=vocab,
        load_s=time.perf_counter() - start,
        info=info,
        draft_tokenizer=draft_tok if vmap is not None else None,
        vocab_map=vmap,
        target_label=plan.target.label,
        **runtime,
    )


def failure(e: BaseException) -> str:
    """An exception from reading a user's model files, in one line: "TypeName: its first line"."""
    first = (str(e).strip().splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {first}"
