"""The engine on tiny random models: greedy exactness, caches, stopping, events, traces."""

import dataclasses

import pytest
import torch

from specviz import engine
from specviz.engine.plain import PlainDecoder
from specviz.engine.speculative import SpeculativeDecoder
from specviz.errors import UserError
from specviz.events import PlainTokenEvent, RoundEvent, Trace
from specviz.lm.prompt import encode_prompt
from specviz.settings import GenerationSettings, SettingsError
from tiny_models import DEVICE, single_thread, tiny_model, tiny_pair, tiny_tokenizer  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPT = "Write a function that reverses a string"
N = 24  # new tokens per run: enough for several rounds, fast on tiny models


def settings(**kw) -> GenerationSettings:
    return GenerationSettings(**{"max_new_tokens": N, "k": 4, "policy": "fixed", **kw})


@pytest.fixture(scope="module")
def plain_greedy():
    """Plain greedy token ids per pair kind (the target is the same for every kind)."""
    return engine.run(tiny_pair("close"), PROMPT, settings(mode="plain")).token_ids


def output_texts(trace: Trace) -> list[str]:
    out = []
    for e in trace.events:
        if isinstance(e, PlainTokenEvent):
            out.append(e.text)
        else:
            out += [d.text for d in e.drafted if d.decision == "accepted"]
            out += [e.emitted.text] if e.emitted else []
    return out


def check_consistent(trace: Trace) -> None:
    """Invariants every trace must hold."""
    s = trace.summary
    assert s.new_tokens == len(trace.token_ids)
    assert "".join(output_texts(trace)) == trace.text
    assert trace.text == tiny_tokenizer().decode(trace.token_ids, skip_special_tokens=True)
    if trace.mode == "plain":
        assert [e.id for e in trace.events] == trace.token_ids
        return
    out = []
    for i, e in enumerate(trace.events):
        assert isinstance(e, RoundEvent) and e.index == i and e.k == len(e.drafted)
        decisions = [d.decision for d in e.drafted]
        n = e.accepted
        assert decisions[:n] == ["accepted"] * n
        assert all(d == "unchecked" for d in decisions[n + 1 :])
        if e.emitted is not None:
            assert e.emitted.kind == ("bonus" if n == e.k else "resampled")
            assert decisions[n : n + 1] == ([] if n == e.k else ["rejected"])
        out += [d.id for d in e.drafted[:n]] + ([e.emitted.id] if e.emitted else [])
        assert e.new_tokens == len(out)
    assert out == trace.token_ids
    assert s.rounds == len(trace.events) == s.target_passes
    assert s.accepted == sum(e.accepted for e in trace.events)
    assert s.tokens_per_round == pytest.approx(s.new_tokens / s.rounds)
    assert s.acceptance_rate == (pytest.approx(s.accepted / s.drafted) if s.drafted else 0.0)


@pytest.mark.parametrize("kind", ["random", "close", "close-int8", "same"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_greedy_speculative_equals_plain_with_a_draft_model(kind, k, plain_greedy):
    trace = engine.run(tiny_pair(kind), PROMPT, settings(k=k))
    assert trace.token_ids == plain_greedy
    check_consistent(trace)
    if kind == "random":
        assert trace.summary.acceptance_rate < 0.2
    if kind == "same":  # everything accepted: every round ends on a bonus token
        assert trace.summary.acceptance_rate == 1.0
        assert all(e.emitted.kind == "bonus" for e in trace.events)
        assert all(p.overlap == 1.0 for e in trace.events for p in e.positions[: e.k])


@pytest.mark.parametrize("drafter", ["lookup", "early-exit"])
@pytest.mark.parametrize("k", [1, 4, 16])
def test_greedy_speculative_equals_plain_with_self_drafting(drafter, k, plain_greedy):
    trace = engine.run(tiny_pair(None), PROMPT, settings(k=k, drafter=drafter))
    assert trace.token_ids == plain_greedy
    check_consistent(trace)


@pytest.mark.parametrize("policy", ["heuristic", "cost-aware"])
@pytest.mark.parametrize("drafter", ["model", "lookup", "early-exit"])
def test_adaptive_greedy_equals_plain(drafter, policy, plain_greedy):
    trace = engine.run(tiny_pair("close"), PROMPT, settings(k=6, policy=policy, drafter=drafter, early_exit_layers=3))
    # Prompt lookup states no confidence to schedule on: an adaptive policy sizes it by the tree cost rule.
    assert trace.summary.policy == ("cost-aware" if drafter == "lookup" else policy)
    assert trace.token_ids == plain_greedy
    check_consistent(trace)


@pytest.mark.parametrize("max_new", [1, 2, 3, 5])
def test_k_larger_than_the_tokens_left(max_new, plain_greedy):
    trace = engine.run(tiny_pair("same"), PROMPT, settings(k=8, max_new_tokens=max_new))
    assert trace.token_ids == plain_greedy[:max_new]
    assert trace.summary.stop_reason == "max_new_tokens"
    assert all(e.k <= max_new - 1 for e in trace.events)
    check_consistent(trace)


def test_lookup_proposes_from_the_context_without_a_draft_model():
    trace = engine.run(tiny_pair(None), PROMPT, settings(drafter="lookup", k=4))
    assert trace.summary.drafted > 0 and trace.summary.draft_passes == 0
    assert all(d.q == 1.0 for e in trace.events for d in e.drafted)  # point masses
    check_consistent(trace)


def _fresh_logits(model, ids):
    with torch.inference_mode():
        return model(input_ids=ids[None]).logits[0, -1]


@pytest.mark.parametrize("kind", ["close", "random"])
def test_rollback_leaves_caches_as_a_fresh_forward_would(kind):
    """After rounds with rejections, both caches hold exactly the accepted prefix: their
    next-token logits equal a fresh forward over the same ids."""
    pair = tiny_pair(kind)
    d = SpeculativeDecoder(pair, settings(k=4, temperature=1.0, seed=1), encode_prompt(pair, PROMPT, settings()))
    d.begin()
    rejected = 0
    for _ in range(40):  # bounded: a close draft is rarely rejected, so go on until one is
        rejected += any(t.decision == "rejected" for t in d.step().drafted)
        if rejected >= 2:
            break
    assert rejected > 0
    ids = d.ids
    assert d.target.length == ids.numel() - 1
    with torch.inference_mode():
        cached = d.target.feed(ids[-1:])[-1]
        pending = ids[d.drafter._lm.length :]
        draft_cached = d.drafter._lm.feed(pending)[-1]
    # Passes over different numbers of tokens round differently (up to ~2e-4 on logits of
    # size ~6 here); a cache holding one token too many or too few moves them by far more.
    assert torch.allclose(cached, _fresh_logits(pair.target, ids), atol=1e-3)
    assert torch.allclose(draft_cached, _fresh_logits(pair.draft, ids), atol=1e-3)


@pytest.mark.parametrize("mode", ["speculative", "plain"])
def test_same_seed_same_run(mode):
    s = settings(temperature=0.9, top_k=40, top_p=0.95, seed=5, mode=mode)
    a = engine.run(tiny_pair("close"), PROMPT, s)
    b = engine.run(tiny_pair("close"), PROMPT, s)
    c = engine.run(tiny_pair("close"), PROMPT, dataclasses.replace(s, seed=6))
    assert a.token_ids == b.token_ids and a.text == b.text
    clocks = {"draft_ms": 0, "verify_ms": 0} if mode == "speculative" else {"ms": 0}

    def strip(t):
        return [dataclasses.replace(e, t_end_s=0, **clocks) for e in t.events]

    assert strip(a) == strip(b)
    assert a.token_ids != c.token_ids
    check_consistent(a)


def test_sampled_rounds_record_u_and_probabilities():
    trace = engine.run(tiny_pair("close"), PROMPT, settings(temperature=1.0, k=4, seed=2))
    check_consistent(trace)
    for e in trace.events:
        for i, d in enumerate(e.drafted):
            if d.decision == "unchecked":
                assert d.u is None
                continue
            assert 0 <= d.u < 1 and 0 < d.q <= 1 and 0 <= d.p <= 1
            assert (d.decision == "accepted") == (d.u < d.p / d.q)
        assert len(e.positions) == min(e.accepted + 1, e.k + 1)
        for pos in e.positions:
            ps = [t.p for t in pos.top]
            assert ps == sorted(ps, reverse=True) and 0 <= pos.overlap <= 1 and pos.top2_logit_gap >= 0
    assert 0 < trace.summary.mean_overlap < 1


def test_stops_at_eos():
    pair = tiny_pair("close")
    plain = engine.run(pair, PROMPT, settings(mode="plain")).token_ids
    eos = plain[6]
    first = plain.index(eos)
    target = tiny_model.__wrapped__(0).to(DEVICE)  # a private copy whose EOS we can change
    target.generation_config.eos_token_id = eos
    eos_pair = dataclasses.replace(pair, target=target)
    for mode, k in [("plain", 4), ("speculative", 1), ("speculative", 5)]:
        trace = engine.run(eos_pair, PROMPT, settings(mode=mode, k=k))
        assert trace.token_ids == plain[: first + 1]
        assert trace.summary.stop_reason == "eos"
        check_consistent(trace)


def test_cancel_and_time_limit_stop_between_rounds():
    pair = tiny_pair("close")
    calls = []
    gen = engine.start(pair, PROMPT, settings(), should_stop=lambda: len(calls) >= 2)
    for event in gen:
        calls.append(event)
    trace = gen.trace()
    assert len(trace.events) == 2 and trace.summary.stop_reason == "cancelled"
    check_consistent(trace)
    trace = engine.run(pair, PROMPT, settings(), max_wall_s=0)
    assert trace.events == [] and trace.summary.stop_reason == "time_limit"


def test_trace_so_far_during_the_run():
    gen = engine.start(tiny_pair("close"), PROMPT, settings(k=2))
    it = iter(gen)
    next(it)
    next(it)
    mid = gen.trace()
    assert mid.summary.rounds == 2 and mid.summary.stop_reason == "" and len(mid.events) == 2
    for _ in it:
        pass
    assert gen.trace().summary.stop_reason == "max_new_tokens"
    with pytest.raises(RuntimeError):
        iter(gen)


def test_minimal_record_skips_display_data_only():
    pair = tiny_pair("close")
    full = engine.run(pair, PROMPT, settings(temperature=0.8, seed=3))
    minimal = engine.run(pair, PROMPT, settings(temperature=0.8, seed=3), record="minimal")
    assert minimal.token_ids == full.token_ids
    assert all(e.positions == [] for e in minimal.events)
    assert minimal.summary.mean_overlap == pytest.approx(full.summary.mean_overlap)


@pytest.mark.parametrize(
    "s", [settings(), settings(temperature=0.7, top_p=0.9), settings(mode="plain", temperature=1.0)]
)
def test_trace_round_trips_through_json(s):
    trace = engine.run(tiny_pair("close"), PROMPT, s)
    assert Trace.from_json(trace.to_json()) == trace
    assert Trace.from_dict(trace.to_dict()) == trace


def test_summary_measures_time_and_passes():
    trace = engine.run(tiny_pair("close"), PROMPT, settings(k=3))
    s = trace.summary
    assert s.wall_s > 0 and s.tokens_per_s == pytest.approx(s.new_tokens / s.wall_s)
    assert s.target_ms > 0 and s.draft_ms > 0
    assert s.draft_passes == sum(e.k for e in trace.events)
    assert trace.meta["drafter"] == "model" and trace.meta["prompt_tokens"] > 0
    plain = engine.run(tiny_pair("close"), PROMPT, settings(mode="plain"))
    assert plain.summary.target_passes == plain.summary.new_tokens == plain.summary.rounds
    assert plain.summary.draft_passes == 0 and plain.mode == "plain"


def test_chat_template_and_raw_prompts():
    pair = tiny_pair("close")
    chat = encode_prompt(pair, "hi", settings())
    raw = encode_prompt(pair, "hi", settings(raw=True))
    assert pair.tokenizer.decode(raw) == "hi"
    assert pair.tokenizer.decode(chat) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    no_template = tiny_pair("close", chat_template=False)
    assert encode_prompt(no_template, "hi", settings()) == raw
    with pytest.raises(UserError, match="empty"):
        engine.start(pair, "", settings(raw=True))


def test_multibyte_characters_are_never_split():
    # A raw prompt ending inside a multi-byte run; whatever the random model emits, each
    # token's text is whole characters and the pieces join to the decoded output.
    trace = engine.run(
        tiny_pair("close"), "日本語のテキスト 🙂", settings(raw=True, temperature=1.0, seed=4, max_new_tokens=60)
    )
    check_consistent(trace)


def test_bad_settings_are_refused_before_running():
    with pytest.raises(SettingsError, match="k must be"):
        engine.start(tiny_pair("close"), PROMPT, settings(k=0))
    with pytest.raises(UserError, match="no draft model"):
        engine.start(tiny_pair(None), PROMPT, settings(drafter="model"))


def test_plain_decoder_steps_one_token_at_a_time():
    pair = tiny_pair("close")
    d = PlainDecoder(pair, settings(max_new_tokens=3), encode_prompt(pair, PROMPT, settings()))
    d.begin()
    events = [d.step() for _ in range(3)]
    assert [e.index for e in events] == [0, 1, 2] and d.stop_reason == "max_new_tokens"


def test_detokenizer_holds_back_incomplete_characters():
    from specviz.engine.detokenizer import Detokenizer

    tok = tiny_tokenizer()
    text = "naïve 日本語 🙂!"
    ids = tok(text)["input_ids"]
    assert any("\ufffd" in tok.decode([i]) for i in ids)  # some tokens split a character
    detok = Detokenizer(tok)
    assert detok.peek(ids) == [detok.push(i) for i in ids]
    pieces = Detokenizer(tok).peek(ids)
    assert "".join(pieces) == text and not any("\ufffd" in p for p in pieces)
    # A run that ends inside a character: the rest comes out on flush, as decode shows it.
    cut = Detokenizer(tok)
    shown = "".join(cut.push(i) for i in ids[:3])
    assert shown == "naïve" and cut.flush() == " \ufffd"
    assert cut.text == tok.decode(ids[:3])


@pytest.mark.parametrize("nodes", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_greedy_tree_equals_plain(nodes, width, plain_greedy):
    trace = engine.run(tiny_pair("close"), PROMPT, settings(k=8, drafter="tree", tree_nodes=nodes, tree_width=width))
    assert trace.token_ids == plain_greedy
    check_consistent(trace)
    assert trace.events[0].k == 0 and not trace.events[0].tree, "the first token comes from the prompt's prefill"
    assert all(r.tree for r in trace.events[1:-1]), "every round between it and a last one-token round drafts a tree"
    for r in trace.events:
        assert len(r.tree) <= nodes
        assert all(n.depth == 1 if n.parent < 0 else n.depth == r.tree[n.parent].depth + 1 for n in r.tree)
        path = [n.token for n in r.tree if n.decision == "accepted"]
        # the accepted path, then the emitted token, is what the round added
        assert path + ([r.emitted.id] if r.emitted else []) == [d.id for d in r.drafted if d.decision == "accepted"] + (
            [r.emitted.id] if r.emitted else []
        )


def test_a_one_wide_tree_is_the_chain():
    pair = tiny_pair("close")
    chain = engine.run(pair, PROMPT, settings(k=4, drafter="model"))
    tree = engine.run(pair, PROMPT, settings(k=4, drafter="tree", tree_nodes=4, tree_width=1))
    assert tree.token_ids == chain.token_ids
    assert [[d.id for d in r.drafted] for r in tree.events] == [[d.id for d in r.drafted] for r in chain.events]
    assert [r.k for r in tree.events] == [r.k for r in chain.events]


def test_a_sampled_tree_trace_round_trips():
    trace = engine.run(
        tiny_pair("close"), PROMPT, settings(k=8, drafter="tree", tree_nodes=8, tree_width=2, temperature=0.8, seed=1)
    )
    again = Trace.from_json(trace.to_json())
    assert [r.tree for r in again.events] == [r.tree for r in trace.events]
    assert any(n.decision == "rejected" for r in trace.events for n in r.tree)
