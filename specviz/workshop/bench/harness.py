"""The timed loop: every method on every prompt, interleaved prompt by prompt.

All methods run on one prompt before the next prompt starts (and their order rotates from
prompt to prompt), so slow phases of a shared machine hit every method alike. One short
warm-up run of each method comes first and is not timed into the results; model loading is
outside the loop altogether.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch

from specviz.workshop.bench import hf_baselines
from specviz.workshop.bench.methods import (
    Method,
    Sample,
    run_llamacpp,
    run_llamacpp_tool,
    run_specviz,
    run_transformers,
    sv_settings,
)
from specviz.workshop.bench.prompts import BenchPrompt, alternating
from specviz.choices import POLICIES
from specviz.workshop.generate_cli import warmup_settings
from specviz.settings import GenerationSettings, default_k


@dataclass(frozen=True)
class BenchOptions:
    max_new_tokens: int = 128
    temperature: float = 0.0
    repeats: int = 1
    k_max: int = default_k(POLICIES.default)  # the upper bound of adaptive k, and the lookup / early-exit draft length
    seed: int = 0
    warmup: bool = True

    def base_settings(self) -> GenerationSettings:
        return GenerationSettings(
            temperature=self.temperature, max_new_tokens=self.max_new_tokens, seed=self.seed, k=self.k_max
        )


# raw[prompt id][method name] -> one Sample per repeat
Raw = dict[str, dict[str, list[Sample]]]
# progress(label) is called once before every run (warm-ups included)
Progress = Callable[[str], None]
# done(raw) is called after each prompt with the prompts finished so far
PromptDone = Callable[[Raw], None]


def count_runs(prompts: list[BenchPrompt], methods: list[Method], opts: BenchOptions) -> int:
    return len(methods) * (len(prompts) * opts.repeats + (1 if opts.warmup and prompts else 0))


def run_bench(
    pair,
    prompts: list[BenchPrompt],
    methods: list[Method],
    opts: BenchOptions,
    *,
    progress: Progress | None = None,
    prompt_done: PromptDone | None = None,
    done: Raw | None = None,
) -> Raw:
    """Prompts run code and prose in turn, so a run cut short still covers both kinds.
    `done` holds prompts an earlier process finished (`--resume`): they are not run again."""
    base = opts.base_settings()
    step = progress or (lambda label: None)
    raw: Raw = dict(done or {})
    todo = [p for p in alternating(prompts) if p.id not in raw]
    if opts.warmup and todo:
        for m in methods:
            step(f"warm-up {m.name}")
            _run_one(pair, todo[0], m, warmup_settings(base), opts)
    for i, p in enumerate(todo, start=len(raw)):
        samples: dict[str, list[Sample]] = {m.name: [] for m in methods}
        for r in range(opts.repeats):
            settings = replace(base, seed=opts.seed + r)
            order = methods[(i + r) % len(methods) :] + methods[: (i + r) % len(methods)]
            for m in order:
                step(f"{p.id} {m.name}")
                samples[m.name].append(_run_one(pair, p, m, settings, opts))
        raw[p.id] = samples
        if prompt_done:
            prompt_done(raw)
    return {p.id: raw[p.id] for p in prompts}


def _run_one(pair, prompt: BenchPrompt, method: Method, settings: GenerationSettings, opts: BenchOptions) -> Sample:
    # A prompt with an output format (the json group) runs every method under it.
    settings = replace(settings, output_format=prompt.output_format, output_spec=prompt.output_spec)
    if method.family == "sv":
        return run_specviz(pair, prompt.prompt, method, sv_settings(method, settings, opts.k_max))
    ids = prompt_ids(pair, prompt.prompt, settings)
    if method.family == "lc":
        return run_llamacpp(pair, ids[0], method, settings)
    if method.family == "ll":
        return run_llamacpp_tool(pair, ids[0], method, settings)
    config = hf_baselines.generation_config(
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        top_k=settings.top_k,
        top_p=settings.top_p,
        eos_ids=eos_ids(pair),
        pad_id=pair.tokenizer.pad_token_id,
    )
    return run_transformers(pair, ids, method, config, settings.seed)


def prompt_ids(pair, prompt: str, settings: GenerationSettings) -> torch.Tensor:
    """The prompt as the engine feeds it to the target, so both libraries see the same ids."""
    from specviz.lm.prompt import encode_prompt

    ids = encode_prompt(pair, prompt, settings)
    return torch.as_tensor(ids, dtype=torch.long, device=pair.device).reshape(1, -1)


def eos_ids(pair) -> list[int]:
    from specviz.lm.prompt import stop_ids

    return sorted(stop_ids(pair))
