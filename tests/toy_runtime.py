"""A runtime written the way docs/ARCHITECTURE.md says a new one is: its models, its `LM`, a
loader, and one `RUNTIMES` entry. It runs transformers' modules with no KV cache: every pass
runs the model over the whole sequence again, so it shares no code with torch's cached loop.
It offers no capability beyond the model interface (no tree passes)."""

from __future__ import annotations

from pathlib import Path

import torch

from specviz.choices import Choice
from specviz.lm.pair import ModelPair

ENTRY = Choice(
    "toy-recompute", "Toy: no KV cache", "each pass runs the model over the whole sequence again", "toy_runtime:load"
)


class ToyModel:
    """A loaded model of this runtime (`lm.runtime.RuntimeModel`)."""

    runtime = ENTRY.name
    precision = "float32"
    context_window = None

    def __init__(self, module: torch.nn.Module, folder: Path, stop_ids: frozenset[int]):
        self.module, self.folder, self.stop_ids = module, folder, stop_ids
        self.vocab_size = module.config.vocab_size

    def open_lm(self) -> "ToyLM":
        return ToyLM(self)

    def cost_facts(self) -> dict:
        return {"folder": str(self.folder)}


class ToyLM:
    """`lm.runtime.LM` without a cache: the tokens fed so far, run again on each feed."""

    runtime = loop = ENTRY.name

    def __init__(self, model: ToyModel):
        self.model, self.vocab_size = model, model.vocab_size
        self.device = torch.device("cpu")
        self.ids: list[int] = []

    @property
    def length(self) -> int:
        return len(self.ids)

    def feed(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        self.ids += ids.tolist()
        with torch.no_grad():
            logits = self.model.module(torch.tensor([self.ids])).logits[0, -ids.numel() :].float()
        return logits if keep == 0 else logits[-keep:]

    def feed_tree(self, tokens, parents):
        raise AssertionError("a runtime without tree passes is never asked for one")

    keep_path = feed_tree

    def crop(self, length: int) -> None:
        del self.ids[length:]

    def reset(self) -> None:
        self.ids = []


def load(plan, *, progress=None) -> ModelPair:
    """The plan's transformers folders, each loaded as a `ToyModel`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(plan.target.location)
    stops = frozenset({tokenizer.eos_token_id})

    def model(ref):
        if ref is None:
            return None
        folder = Path(ref.location)
        return ToyModel(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval(), folder, stops)

    target = model(plan.target)
    if progress is not None:
        progress(1.0, f"{plan.name} ready on {ENTRY.name}")
    return ModelPair(
        name=plan.name,
        tokenizer=tokenizer,
        target=target,
        draft=model(plan.draft),
        vocab_size=len(tokenizer),
        device=torch.device("cpu"),
        dtype=torch.float32,
        runtime=ENTRY.name,
    )
