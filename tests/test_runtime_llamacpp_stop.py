"""Stop on the llama.cpp runtime, on tiny GGUF files (`tiny_gguf`): a prompt goes in batches with
the run's stop check between them, a long batch is aborted inside `llama_decode` (llama.cpp's
abort callback), an aborted context is freed rather than reused, and the next run is exact;
an unloaded model is freed by llama.cpp once no context of it is out."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("llama_cpp")

from specviz import engine  # noqa: E402
from specviz.choices import DRAFTERS, LLAMACPP  # noqa: E402
from specviz.errors import UserError  # noqa: E402
from specviz.lm import interrupt, load_pair  # noqa: E402
from specviz.lm.llamacpp_runtime import abort  # noqa: E402
from specviz.lm.llamacpp_runtime.lm import BATCH  # noqa: E402
from specviz.lm.llamacpp_runtime.model import LlamaCppModel  # noqa: E402
from specviz.lm.runtime import missing  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402
from test_runtime_llamacpp import llamacpp_pair  # noqa: E402
from test_stop_prefill import long_prompt  # noqa: E402
from tiny_gguf import tiny_gguf  # noqa: E402
from tiny_head import ensure_head  # noqa: E402

PROMPT_IDS = torch.arange(3 * BATCH) % 300 + 20  # three batches of ids inside the tiny vocabulary
GREEDY = GenerationSettings(max_new_tokens=10, k=3, policy="fixed")


@pytest.fixture(scope="module")
def model():
    return LlamaCppModel(tiny_gguf("target"), threads=1)


def test_a_stop_between_batches_ends_the_prefill_after_one_batch(model):
    lm = model.open_lm()
    with interrupt.checked(lambda: "cancelled" if lm.length else ""):  # stop once the first batch is in
        with pytest.raises(interrupt.Interrupted, match="cancelled"):
            lm.feed(PROMPT_IDS)
    assert lm.length == BATCH and not lm._spent  # a clean stop between batches


def test_the_abort_callback_ends_a_llama_decode_and_the_context_is_not_reused(model):
    calls = []

    def check():
        calls.append(1)
        return "time_limit" if len(calls) > 5 else ""  # asked after each node: stop after the fifth

    lm = model.open_lm()
    ctx = lm._ctx
    with interrupt.checked(check):
        with pytest.raises(interrupt.Interrupted, match="time_limit"):
            lm.feed(PROMPT_IDS[:BATCH])
    assert len(calls) == 6  # the sixth node's check aborted the decode: no node ran after it
    assert lm._spent and lm.length == 0
    lm.close()
    assert all(idle[0] is not ctx for idle in model._idle)  # freed, not kept for another run
    # The model serves the next LM as before: its logits are a fresh context's.
    fresh, again = model.open_lm().feed(PROMPT_IDS[:40]), model.open_lm().feed(PROMPT_IDS[:40])
    assert torch.equal(fresh, again)


def test_short_passes_run_without_the_callback(model):
    calls = []
    lm = model.open_lm()
    with interrupt.checked(lambda: calls.append(1) or ""):
        lm.feed(PROMPT_IDS[: abort.MIN_TOKENS - 1])
        lm.feed(PROMPT_IDS[:1])
    assert calls == []  # each call would take the GIL once per graph node


def test_stop_during_the_prefill_through_the_engine_then_the_next_run_is_exact():
    pair = llamacpp_pair("close")
    prompt = long_prompt(chunks=2)
    generation = engine.start(pair, prompt, GREEDY, should_stop=lambda: generation._decoder.target.length > 0)
    assert list(generation) == [] and generation.trace().summary.stop_reason == "cancelled"
    plain = engine.run(pair, prompt, GenerationSettings(mode="plain", max_new_tokens=10))
    ensure_head(pair)  # the head drafter reads a trained head
    for drafter in [c.name for c in DRAFTERS if not c.capability or not missing(LLAMACPP, c.capability)]:
        spec = engine.run(pair, prompt, GenerationSettings(max_new_tokens=10, k=3, policy="fixed", drafter=drafter))
        assert spec.token_ids == plain.token_ids, drafter


def test_a_closed_model_is_freed_once_its_last_context_is_back(monkeypatch):
    import llama_cpp

    freed = []
    original = llama_cpp.llama_model_free
    monkeypatch.setattr(llama_cpp, "llama_model_free", lambda ptr: (freed.append(ptr), original(ptr))[1])
    m = LlamaCppModel(tiny_gguf("close"), threads=1)
    lm = m.open_lm()
    lm.feed(PROMPT_IDS[:8])  # a run still finishing its pass
    m.close()
    assert m.closed and freed == []
    with pytest.raises(UserError, match="unloaded"):
        m.open_lm()
    lm.close()
    assert len(freed) == 1 and m.ptr is None


def test_unloading_a_llamacpp_pair_frees_its_models(monkeypatch):
    import llama_cpp

    freed = []
    original = llama_cpp.llama_model_free
    monkeypatch.setattr(llama_cpp, "llama_model_free", lambda ptr: (freed.append(ptr), original(ptr))[1])
    spec = f"{tiny_gguf('close')} -> {tiny_gguf('target')}"
    pair = load_pair(spec, runtime=LLAMACPP)
    engine.run(pair, "hi", GREEDY)
    assert pair.close() and pair.target.closed and pair.draft.closed and len(freed) == 2
    again = load_pair(spec, runtime=LLAMACPP)
    assert again is not pair and engine.run(again, "hi", GREEDY).token_ids


def test_idle_contexts_are_freed_after_a_while(monkeypatch):
    from specviz.lm import resident

    pair = load_pair(f"{tiny_gguf('close')} -> {tiny_gguf('target')}", runtime=LLAMACPP)
    engine.run(pair, "hi", GREEDY)
    assert pair.target._idle and pair.draft._idle  # kept for the next run
    assert resident.release_idle(older_than_s=3600) == 0  # not yet unused that long
    freed = resident.release_idle(older_than_s=0)
    assert freed >= 2 and not pair.target._idle and not pair.draft._idle
    assert engine.run(pair, "hi", GREEDY).token_ids  # new contexts are made as needed
