"""Training a draft head by self-distillation: the target's states over local text teach it.

From position t's state f_t and the next token x_{t+1}, the head guesses f_{t+1}; the loss is
the cross-entropy from the target's own next-token distribution there (its likeliest tokens,
kept while it read: `states.TEACHER_TOP`) to the head's readout over the subset, plus a small
L1 pull on the state itself (as EAGLE trains). Products run in bf16 on a CPU that has it natively. Each batch
also runs the head a second step from its own guess (f'_{t+1}, x_{t+2} -> f_{t+2}), as it
drafts. One window in twenty is held out; the head's held-out greedy acceptance by draft
position is what the file records and the bench compares with the run's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specviz.drafters.head_model import DraftHead, HeadInfo
from specviz.lm.torch_runtime.devices import native_bf16
from specviz.workshop.training.states import States

HELD_OUT_EVERY = 20  # one window in this many is held out
STATE_WEIGHT = 0.1  # the L1 pull on the state, beside the distribution's cross-entropy
NOISE = 0.05  # relative noise on the input state in training: drafting reads its own guesses
POSITIONS = 3  # held-out acceptance is reported for draft positions 1..POSITIONS


@dataclass
class Plan:
    subset: int = 8192  # vocabulary the head reads out
    inner: int = 0  # its MLP width (0: the target's hidden size)
    batch: int = 256
    lr: float = 2e-3
    steps: int = 4000  # at most; `seconds` may stop it first
    seconds: float = 600.0
    seed: int = 0


def split(states: States) -> tuple[torch.Tensor, torch.Tensor]:
    """Training and held-out start positions t: t, t + 1 and t + 2 in one window."""
    w = states.window
    ok = torch.zeros(len(states), dtype=torch.bool)
    ok[:-2] = (w[:-2] == w[1:-1]) & (w[1:-1] == w[2:])
    held = (w % HELD_OUT_EVERY) == 0  # window 0 among them: every part holds some out
    return torch.nonzero(ok & ~held).flatten(), torch.nonzero(ok & held).flatten()


def choose_subset(states: States, train: torch.Tensor, size: int, vocab_size: int) -> torch.Tensor:
    """The `size` ids the target chose most often after the training positions (then the
    corpus's most frequent tokens), most frequent first; ids below `vocab_size` only."""
    chosen = torch.bincount(states.argmax[train].clamp(max=vocab_size), minlength=vocab_size + 1)[:vocab_size]
    seen = torch.bincount(states.tokens.clamp(max=vocab_size), minlength=vocab_size + 1)[:vocab_size]
    score = chosen.double() * 1e9 + seen.double()  # chosen first, then seen
    order = torch.argsort(score, descending=True, stable=True)
    return order[: min(size, vocab_size)]


def batch_loss(head: DraftHead, states: States, t: torch.Tensor, g: torch.Generator, bf16: bool) -> torch.Tensor:
    """Two head steps from the states at `t` (noised), each scored against the target's next
    distribution and state; matrix products in bf16 where `bf16`."""
    f0 = states.features[t].float()
    state = f0 + NOISE * f0.std() * torch.randn(f0.shape, generator=g)
    loss = torch.zeros(())
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for j in (1, 2):
            state = head.step(state, states.tokens[t + j])
            truth = states.features[t + j].float()
            loss = loss + distilled(head, state, states, t + j) + STATE_WEIGHT * F.smooth_l1_loss(state.float(), truth)
    return loss


def fit(head: DraftHead, states: States, train: torch.Tensor, plan: Plan, progress=None) -> tuple[int, bool]:
    """Train `head` in place; the steps taken and whether in bf16."""
    g = torch.Generator().manual_seed(plan.seed)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=plan.lr, weight_decay=0.0)
    bf16 = native_bf16() and states.features.device.type == "cpu"
    start, step = time.perf_counter(), 0
    while step < plan.steps and time.perf_counter() - start < plan.seconds:
        frac = max(step / plan.steps, (time.perf_counter() - start) / plan.seconds)
        for group in opt.param_groups:  # cosine decay over whichever budget ends first
            group["lr"] = plan.lr * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))
        loss = batch_loss(head, states, train[torch.randint(len(train), (plan.batch,), generator=g)], g, bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if progress is not None and step % 20 == 0:
            progress(frac, f"training step {step:,}: loss {loss.item():.3f}")
    return step, bf16


def distilled(head: DraftHead, state: torch.Tensor, states: States, at: torch.Tensor) -> torch.Tensor:
    """Cross-entropy from the target's next-token distribution at positions `at` (its likeliest
    tokens that the subset holds) to the head's, read out from its guessed `state`."""
    logq = head.read(state).float().log_softmax(-1)
    slots = head.slot[states.top_ids[at]]  # (B, K); the subset's size where outside it
    inside = slots < logq.shape[1]
    picked = logq.gather(1, slots.clamp(max=logq.shape[1] - 1))
    return -(states.top_p[at].float() * inside * picked).sum(1).mean()


@torch.inference_mode()
def held_out_acceptance(head: DraftHead, states: States, held: torch.Tensor) -> tuple[list[float], float]:
    """Greedy acceptance by draft position on held-out text, each position counted where the
    earlier ones were accepted and the text went on as the target would have (so the
    target's choice there is known); and the share of the target's choices inside the subset."""
    n = len(states)
    t = held
    state = states.features[t].float()
    token = states.tokens[t + 1]
    rates = []
    for j in range(1, POSITIONS + 1):
        if not len(t):
            break
        state, logits = head(state, token)
        guess = head.subset[logits.argmax(-1)]
        truth = states.argmax[t + j]
        right = guess == truth
        rates.append(float(right.float().mean()))
        # Go on where the guess was right and the text itself continued with it.
        nxt = t + j + 1
        keep = right & (nxt < n)
        idx = keep.nonzero().flatten()
        keep[idx] = (states.window[nxt[idx]] == states.window[t[idx]]) & (states.tokens[nxt[idx]] == truth[idx])
        t, state, token = t[keep], state[keep], truth[keep]
    covered = torch.isin(states.argmax[held + 1], head.subset).float().mean()
    return rates, float(covered)


def train_head(
    parts: dict[str, States], tables, plan: Plan, *, label: str, runtime: str, corpus: str, progress=None
) -> tuple[DraftHead, HeadInfo]:
    """A head trained on the states of every part ("source", "answers", ...); `tables` are the
    target's embedding and LM head rows (`tables.target_tables`) and its logits width. Its
    held-out acceptance is measured on each part apart."""
    start = time.perf_counter()
    torch.manual_seed(plan.seed)
    states = States.joined(list(parts.values()), HELD_OUT_EVERY)  # each part's held-out windows stay held out
    train, held = split(states)
    embed, readout, vocab_size = tables
    subset = choose_subset(states, train, plan.subset, vocab_size)
    hidden = states.features.shape[1]
    inner = plan.inner or hidden
    head = DraftHead(subset, embed(subset), readout(subset), vocab_size, inner)
    steps, bf16 = fit(head, states, train, plan, progress)
    head.eval().requires_grad_(False)
    acceptance, coverage = {}, {}
    for name, part in parts.items():
        _, part_held = split(part)
        rates, covered = held_out_acceptance(head, part, part_held)
        acceptance[name], coverage[name] = [round(r, 4) for r in rates], round(covered, 4)
    info = HeadInfo(
        target=label,
        hidden=hidden,
        vocab_size=vocab_size,
        subset=len(subset),
        inner=inner,
        corpus=corpus,
        train_tokens=int(len(train)),
        held_out_tokens=int(len(held)),
        steps=steps,
        seconds=round(time.perf_counter() - start, 1),
        runtime=runtime,
        acceptance=acceptance,
        subset_coverage=coverage,
        tokens={name: len(part) for name, part in parts.items()},
        precision="bf16 products" if bf16 else "fp32",
    )
    return head, info
