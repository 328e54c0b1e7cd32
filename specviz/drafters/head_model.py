"""A draft head: one small layer that runs the target's own state one token ahead (EAGLE-style).

The target's last hidden state at position t (after its final norm: what its LM head reads)
and the embedding of the token chosen at t + 1 go through one layer to a guess of the
target's state at t + 1, read out by the target's own LM head rows over a frequency-ranked
subset of the vocabulary. Fed its own guess and the token it drafted, it drafts on.

The layer is an input projection and a gated MLP, without attention: the target's state
already carries the context, so the head keeps no cache of its own and a round has nothing
to catch up. It is trained on the target's states over local text (`specviz.workshop.training`) and
stored with what it was trained on (`HeadFile`).

The readout covers `subset` only: a token outside it gets q = 0, which the acceptance rule
handles exactly (the residual max(0, p - q) keeps p there).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

FORMAT = 2  # bumped when the file's tensors change meaning


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight.to(x.dtype), self.eps)


class DraftHead(nn.Module):
    """(state (n, H), next token (n,)) -> (the target's next state, guessed (n, H); logits (n, S)).

    `subset` (S,) are the vocabulary ids it reads out, most frequent first; `embed` and
    `readout` (S, H) are the target's embedding and LM head rows for them (frozen). A token
    outside the subset enters as the mean of the subset's embeddings (`slot` maps ids to rows).
    """

    def __init__(self, subset: torch.Tensor, embed: torch.Tensor, readout: torch.Tensor, vocab_size: int, inner: int):
        super().__init__()
        width = embed.shape[1]
        self.register_buffer("subset", subset.long())
        slot = torch.full((vocab_size,), len(subset), dtype=torch.long)
        slot[subset.long()] = torch.arange(len(subset))
        self.register_buffer("slot", slot)
        self.register_buffer("embed", torch.cat([embed, embed.mean(0, keepdim=True)]).float())
        self.register_buffer("readout", readout.float())
        self.state_norm, self.token_norm = RMSNorm(width), RMSNorm(width)
        self.fc = nn.Linear(2 * width, width)
        self.mlp_norm = RMSNorm(width)
        self.gate, self.up = nn.Linear(width, inner, bias=False), nn.Linear(width, inner, bias=False)
        self.down = nn.Linear(inner, width, bias=False)
        self.out_norm = RMSNorm(width)

    @property
    def vocab_size(self) -> int:
        return self.slot.numel()

    def step(self, state: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        """The guessed next state."""
        e = self.embed[self.slot[token]]
        x = self.fc(torch.cat([self.state_norm(state), self.token_norm(e)], -1))
        h = self.mlp_norm(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return self.out_norm(x)

    def read(self, state: torch.Tensor) -> torch.Tensor:
        """Logits over the subset, (n, S)."""
        return state @ self.readout.T

    def forward(self, state: torch.Tensor, token: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        nxt = self.step(state, token)
        return nxt, self.read(nxt)

    def full_row(self, logits: torch.Tensor) -> torch.Tensor:
        """Subset logits (S,) as a vocabulary-wide row, -inf outside the subset."""
        row = torch.full((self.vocab_size,), float("-inf"), dtype=logits.dtype, device=logits.device)
        return row.index_copy_(0, self.subset, logits)


@dataclass
class HeadInfo:
    """What a head was trained on and how well it guesses, stored beside its tensors."""

    target: str  # the target it reads (its label), and its shape
    hidden: int
    vocab_size: int
    subset: int
    inner: int
    corpus: str  # where the text came from
    train_tokens: int
    held_out_tokens: int
    steps: int
    seconds: float
    runtime: str  # the runtime whose states it was trained on
    # Per part of the data ("source": the packages' own text, "answers": the target's own
    # answers to requests made from it), held-out greedy acceptance by draft position (1, 2,
    # ...): the head's argmax equals the target's, each position given the earlier ones were.
    acceptance: dict[str, list[float]] = field(default_factory=dict)
    # Per part, the share of the target's held-out choices inside the subset.
    subset_coverage: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # positions per part
    precision: str = "fp32"  # of the training's matrix products
    format: int = FORMAT


def save(head: DraftHead, info: HeadInfo, path: Path) -> None:
    """The head's tensors (safetensors) and its info (JSON beside them), each written then renamed."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(tmp))
    tmp.replace(path)
    meta = path.with_suffix(".json")
    meta.with_suffix(".tmp").write_text(json.dumps(asdict(info), indent=1))
    meta.with_suffix(".tmp").replace(meta)


def load(path: Path) -> tuple[DraftHead, HeadInfo]:
    """A saved head, ready to draft (eval mode, no gradients), and its info."""
    from safetensors.torch import load_file

    info = HeadInfo(**json.loads(path.with_suffix(".json").read_text()))
    if info.format != FORMAT:
        raise ValueError(f"{path}: a head of format {info.format}, this version reads {FORMAT}")
    tensors = load_file(str(path))
    subset = tensors["subset"]
    head = DraftHead(subset, tensors["embed"][:-1], tensors["readout"], info.vocab_size, info.inner)
    head.load_state_dict(tensors)
    return head.eval().requires_grad_(False), info
