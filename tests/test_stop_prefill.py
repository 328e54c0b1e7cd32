"""Stop and the wall-time limit reach into a prompt's prefill (`lm.interrupt`), on the torch
runtime: the prompt goes in chunks, the run's stop check between them, the target's and the
draft's alike; an interrupted run leaves the next run in the process exact."""

from __future__ import annotations

import threading

import pytest
import torch
from tiny_models import CORPUS, single_thread, tiny_pair, tiny_tokenizer  # noqa: F401
from tiny_head import ensure_head

from specviz import engine
from specviz.choices import DRAFTERS
from specviz.engine.decoder import Decoder
from specviz.lm import interrupt
from specviz.lm.runtime import open_lm
from specviz.lm.torch_runtime.lean import LeanLM
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.usefixtures("single_thread")

GREEDY = GenerationSettings(max_new_tokens=12, k=3, policy="fixed")


def long_prompt(chunks: int = 3) -> str:
    """A prompt of more than `chunks` prefill chunks of the tiny tokenizer."""
    tok, text = tiny_tokenizer(), ""
    while len(tok(text)["input_ids"]) <= chunks * interrupt.CHUNK:
        text += " ".join(CORPUS) + "\n"
    return text


class _Passes(list):
    hooks: list = []


@pytest.fixture
def passes(monkeypatch):
    """Every lean pass as (role, tokens), role "draft" or "target"; `on_pass` is called after each."""
    seen = _Passes()
    original = LeanLM._pass

    def spy(self, ids, keep, allowed=None, positions=None):
        out = original(self, ids, keep, allowed, positions)
        seen.append((self.role, ids.numel()))
        for hook in seen.hooks:
            hook(self.role, ids.numel())
        return out

    monkeypatch.setattr(LeanLM, "_pass", spy)
    return seen


def watch(passes: _Passes, *hooks) -> None:
    """From now on (the pair's pass costs measured when the run was made): record, and call `hooks`."""
    passes.clear()
    passes.hooks = list(hooks)


@pytest.fixture
def pair(monkeypatch):
    p = tiny_pair("close")
    assert isinstance(open_lm(p.target, p.device), LeanLM)  # the passes the spy sees
    draft_embed = p.draft.model.embed_tokens
    monkeypatch.setattr(
        LeanLM, "role", property(lambda self: "draft" if self._embed is draft_embed else "target"), raising=False
    )
    return p


def test_chunked_feed_gives_the_rows_of_one_pass(pair):
    ids = torch.tensor(tiny_tokenizer()(long_prompt(2))["input_ids"])
    for keep in (1, 5, 0):
        whole, chunked = open_lm(pair.target, pair.device), open_lm(pair.target, pair.device)
        one = interrupt.feed_in_chunks(lambda x, k: whole._pass(x, k, None, None), ids, keep, chunk=ids.numel())
        parts = chunked.feed(ids, keep)
        assert parts.shape == one.shape and chunked.length == whole.length == ids.numel()
        torch.testing.assert_close(parts, one, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["plain", "speculative"])
def test_stop_during_the_target_prefill_ends_the_run_within_one_chunk(pair, passes, mode):
    flag = threading.Event()
    generation = engine.start(
        pair, long_prompt(), GenerationSettings(mode=mode, max_new_tokens=12), should_stop=flag.is_set
    )
    watch(passes, lambda role, n: flag.set())  # Stop pressed while the first chunk runs
    events = list(generation)
    trace = generation.trace()
    assert trace.summary.stop_reason == "cancelled" and events == [] and trace.token_ids == []
    assert passes == [("target", interrupt.CHUNK)]  # one chunk, then the check between chunks


def test_stop_during_the_draft_prefill_ends_the_run_within_one_chunk(pair, passes):
    flag = threading.Event()
    generation = engine.start(pair, long_prompt(), GREEDY, should_stop=flag.is_set)
    watch(passes, lambda role, n: role == "draft" and flag.set())
    events = list(generation)
    assert generation.trace().summary.stop_reason == "cancelled"
    assert len(events) == 1  # the first token, from the target's prefill; the draft reads the prompt next
    assert [p for p in passes if p[0] == "draft"] == [("draft", interrupt.CHUNK)]


def test_the_wall_time_limit_ends_a_prefill_within_one_chunk(pair, passes, monkeypatch):
    monkeypatch.setattr(Decoder, "elapsed", lambda self: 1000.0)  # the first chunk "took" 1000 s
    generation = engine.start(pair, long_prompt(), GREEDY, max_wall_s=5)
    watch(passes)
    list(generation)
    trace = generation.trace()
    assert trace.summary.stop_reason == "time_limit" and trace.events == []
    assert passes == [("target", interrupt.CHUNK)]


def test_after_an_interrupted_prefill_the_next_run_is_exact(pair, passes):
    prompt = long_prompt()
    flag = threading.Event()
    generation = engine.start(pair, prompt, GREEDY, should_stop=flag.is_set)
    watch(passes, lambda role, n: flag.set())
    assert not list(generation) and generation.trace().summary.stop_reason == "cancelled"
    watch(passes)
    plain = engine.run(pair, prompt, GenerationSettings(mode="plain", max_new_tokens=12))
    ensure_head(pair)  # the head drafter reads a trained head
    for drafter in [c.name for c in DRAFTERS]:  # each reads the prompt its own way: in chunks, through the LM
        extra = {"early_exit_layers": 2} if drafter == "early-exit" else {}
        settings = GenerationSettings(max_new_tokens=12, k=3, policy="fixed", drafter=drafter, **extra)
        spec = engine.run(pair, prompt, settings)
        assert spec.token_ids == plain.token_ids and spec.summary.stop_reason == plain.summary.stop_reason, drafter
    assert len(plain.token_ids) == 12 or plain.summary.stop_reason == "eos"
