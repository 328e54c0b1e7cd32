"""The draft head (`drafters.head`): trained here in seconds on tiny models, exact, and stored.

- training: the target's states over text (`training.states`), a head trained on them
  (`training.train`), saved and loaded with what it was trained on; held-out acceptance by
  position is measured against the target's own greedy choices;
- greedy: speculative decoding with the head equals plain greedy decoding token for token on
  tiny torch models (fixed and cost-aware policies, several k) and on llama.cpp (tiny GGUF);
- sampling: the head's proposals verified by the engine's rule give the first two output
  tokens distributed as the target's (N = 20,000 runs, within 5 standard errors:
  `monte_carlo.frequencies_match`), with a target that puts mass outside the head's
  vocabulary subset (q = 0 there); a q that claims mass it never samples fails the same check.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specviz import engine
from specviz.drafters import head as headmod
from specviz.drafters.head_model import DraftHead, load, save
from specviz.engine.verify import verify
from specviz.errors import UserError
from specviz.lm.sampling import Sampler
from specviz.settings import GenerationSettings
from specviz.workshop.training import states, train
from specviz.workshop.training.tables import target_tables
from monte_carlo import frequencies_match
from tiny_models import CORPUS, single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPT = CORPUS[0]
N_NEW = 24


def windows(tokenizer, size=96):
    ids = tokenizer("\n".join(CORPUS * 20), add_special_tokens=False)["input_ids"]
    return [(f"w{i}", ids[i : i + size]) for i in range(0, len(ids) - size, size)]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("cache")
    mp.setenv("SPECVIZ_CACHE", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def trained(cache):
    """A head trained on the tiny target's states, saved where the drafter looks for it."""
    pair = tiny_pair(None)
    got = states.collect(pair, iter(windows(pair.tokenizer)), 3000)
    plan = train.Plan(subset=300, steps=400, seconds=120, batch=64)
    head, info = train.train_head(
        {"source": got},
        target_tables(pair),
        plan,
        label=headmod.target_label(pair),
        runtime="torch",
        corpus="tiny corpus",
    )
    save(head, info, headmod.head_path(headmod.target_label(pair)))
    return pair, got, head, info


def test_the_states_are_the_targets_own_and_its_greedy_choices(trained):
    pair, got, _, _ = trained
    ids = torch.tensor(windows(pair.tokenizer)[0][1])
    logits = pair.target(ids[None]).logits[0]
    n = len(ids)
    assert torch.equal(got.tokens[:n], ids)
    assert torch.equal(got.argmax[:n], logits.argmax(-1))
    hidden = pair.target(ids[None], output_hidden_states=True).hidden_states[-1][0]
    torch.testing.assert_close(got.features[:n].float(), hidden, atol=2e-2, rtol=2e-2)  # stored as float16


def test_training_learns_and_the_file_says_how_it_was_trained(trained, cache):
    pair, got, head, info = trained
    untrained = DraftHead(head.subset, head.embed[:-1], head.readout, head.vocab_size, info.inner)
    _, held = train.split(got)
    before, _ = train.held_out_acceptance(untrained.eval(), got, held)
    assert info.acceptance["source"][0] > before[0] + 0.1  # learnt well beyond a random layer
    assert info.train_tokens > 0 and info.held_out_tokens > 0 and info.steps == 400
    again, info_again = load(headmod.head_path(headmod.target_label(pair)))
    assert info_again == info
    for name, value in head.state_dict().items():
        assert torch.equal(again.state_dict()[name], value)


def test_answers_are_the_targets_own_greedy_text_with_its_states(trained):
    pair = trained[0]
    got = states.answer(pair, iter(["Write a function `add(a, b)`: adds two numbers", CORPUS[2]]), 40)
    assert 2 <= len(got) <= 40 and got.files[0].startswith("Write a function")
    same = got.window[1:] == got.window[:-1]
    assert torch.equal(got.argmax[:-1][same], got.tokens[1:][same])  # each token is the target's choice before it
    torch.testing.assert_close(got.top_p.float().sum(1), torch.ones(len(got)), atol=0.35, rtol=0)  # top-16 of 384


def test_requests_come_from_documented_public_functions(tmp_path):
    from specviz.workshop.training.corpus import requests

    (tmp_path / "m.py").write_text(
        'def area(w, h):\n    """The area of a w by h rectangle."""\n    return w * h\n\n'
        'def _hidden():\n    """Not asked about, being private."""\n\n'
        'def short():\n    """Too short"""\n'
    )
    assert list(requests([tmp_path / "m.py"])) == [
        "Write a Python function `area(w, h)`: The area of a w by h rectangle."
    ]


def test_a_target_without_a_trained_head_is_told_how_to_train_one(cache):
    pair = dataclasses.replace(tiny_pair(None), name="tiny-untrained")
    with pytest.raises(UserError, match="train-head"):
        engine.run(pair, PROMPT, GenerationSettings(drafter="head", max_new_tokens=4, raw=True))


def test_train_head_with_no_options_trains_as_train_for_does_by_default():
    import argparse
    import inspect

    from specviz.workshop.training import cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    given = vars(parser.parse_args([]))
    taken = {k: p.default for k, p in inspect.signature(cli.train_for).parameters.items() if k != "spec"}
    assert {k: given[k] for k in taken} == taken
    expected = dict(runtime="auto", tokens=60_000, answer_tokens=12_000, minutes=30.0, subset=8192, window=512, seed=0)
    assert taken == expected


@pytest.fixture(scope="module")
def plain(trained):
    pair = trained[0]
    return engine.run(pair, PROMPT, GenerationSettings(mode="plain", max_new_tokens=N_NEW, raw=True)).token_ids


@pytest.mark.parametrize("policy", ["fixed", "cost-aware"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_equals_plain(trained, plain, k, policy):
    pair = trained[0]
    trace = engine.run(
        pair, PROMPT, GenerationSettings(drafter="head", max_new_tokens=N_NEW, k=k, policy=policy, raw=True)
    )
    assert trace.token_ids == plain
    if policy == "fixed":
        assert trace.summary.drafted > 0


def test_greedy_equals_plain_under_an_output_format(trained):
    pair = trained[0]
    fmt = dict(
        output_format="regex", output_spec="[a-z()\\[\\]:.' \\n-]{1,60}\\n\\n"
    )  # code-like text, ended by a blank line
    want = engine.run(pair, PROMPT, GenerationSettings(mode="plain", max_new_tokens=N_NEW, raw=True, **fmt))
    for k in (2, 5):
        got = engine.run(
            pair, PROMPT, GenerationSettings(drafter="head", policy="fixed", k=k, max_new_tokens=N_NEW, raw=True, **fmt)
        )
        assert got.token_ids == want.token_ids
        assert got.summary.drafted > 0


def test_greedy_equals_plain_on_llamacpp(trained):
    pytest.importorskip("llama_cpp")
    from test_runtime_llamacpp import llamacpp_pair

    pair = llamacpp_pair(None)  # the same tiny target as a GGUF file; its head is filed under its own name
    torch_pair, _, head, info = trained
    save(head, info, headmod.head_path(headmod.target_label(pair)))
    want = engine.run(pair, PROMPT, GenerationSettings(mode="plain", max_new_tokens=N_NEW, raw=True)).token_ids
    for k in (2, 5):
        got = engine.run(
            pair, PROMPT, GenerationSettings(drafter="head", policy="fixed", k=k, max_new_tokens=N_NEW, raw=True)
        )
        assert got.token_ids == want
        assert got.summary.drafted > 0


# ---- the rule with the head's q, by Monte Carlo ---------------------------------------------

V, SUBSET, WIDTH = 6, [0, 1, 2, 3], 8
N_RUNS = 20_000


class StillTarget:
    """What the drafter reads of a target: `keep_features` and the last pass's states."""

    def __init__(self, g):
        self.features = torch.randn(3, WIDTH, generator=g)

    def keep_features(self):
        pass


def target_p(context: tuple[int, ...]) -> torch.Tensor:
    """A fixed target distribution after each output so far, with mass outside the subset."""
    g = torch.Generator().manual_seed(11 + sum((t + 1) * 7**i for i, t in enumerate(context)))
    logits = torch.randn(V, generator=g)
    logits[4] += 1.0  # token 4: outside the head's subset, often chosen by the target
    return logits.softmax(-1).double()


def first_two(drafter, g, wrong_q: bool) -> tuple[int, int]:
    ctx, out = torch.tensor([0]), []
    while len(out) < 2:
        prop = drafter.propose(ctx, 2, lambda c: True)
        q = prop.q.double()
        if wrong_q:  # claims a share of mass on every token, though it drew from the subset only
            q = 0.7 * q + 0.3 / V
        rows = torch.stack([target_p(tuple(out + prop.tokens[:i].tolist())) for i in range(len(prop) + 1)])
        v = verify(prop.tokens, rows, q, generator=g)
        out += v.new_tokens
        drafter.accepted(v.n_accepted)
        ctx = torch.cat([ctx, torch.tensor(v.new_tokens)])
    return out[0], out[1]


@pytest.mark.parametrize("wrong_q", [False, True])
def test_sampled_output_is_distributed_as_the_targets(wrong_q):
    g = torch.Generator().manual_seed(5)
    torch.manual_seed(5)
    head = DraftHead(torch.tensor(SUBSET), torch.randn(4, WIDTH), torch.randn(4, WIDTH) * 2, V, 16).eval()
    sampler = Sampler(GenerationSettings(temperature=1.0), V)
    drafter = headmod.HeadDrafter("head", head.requires_grad_(False), StillTarget(g), sampler, g, set())
    drafter.begin(torch.tensor([0]))
    drafter.accepted(0)  # the first round's pass gives the first state (begin's round drafts nothing)
    counts = torch.zeros(V * V, dtype=torch.float64)
    with torch.inference_mode():
        for _ in range(N_RUNS):
            a, b = first_two(drafter, g, wrong_q)
            counts[a * V + b] += 1
    want = torch.stack([target_p(())[a] * target_p((a,)) for a in range(V)]).flatten()
    ok, why = frequencies_match(counts, want, N_RUNS)
    assert ok != wrong_q, why


def test_the_inspector_tells_a_head_round_with_its_q(trained):
    from specviz import viz
    from specviz.viz.source import source_html

    pair = trained[0]
    trace = engine.run(
        pair,
        PROMPT,
        GenerationSettings(drafter="head", policy="fixed", k=3, max_new_tokens=12, temperature=0.8, raw=True),
    )
    event = next(e for e in trace.events if e.type == "round" and e.drafted)
    story = " ".join(viz.round_story(event))
    assert "the draft head (from the target's own state) proposed" in story and "the head gave q =" in story
    panel = source_html(event)
    assert "nothing to catch up" in panel and f"q = {event.drafted[0].q:.2f}" in panel


def test_llamacpp_gives_the_targets_hidden_states_for_the_kept_rows():
    pytest.importorskip("llama_cpp")
    from test_runtime_llamacpp import llamacpp_pair

    from specviz.lm.runtime import open_lm

    pair = llamacpp_pair(None)
    ids = torch.tensor(pair.tokenizer("\n".join(CORPUS), add_special_tokens=False)["input_ids"])
    lm = open_lm(pair.target, pair.device)
    lm.keep_features()
    last = lm.feed(ids, keep=1)
    state = lm.features
    lm.reset()
    every = lm.feed(ids, keep=0)
    assert state.shape[0] == 1 and lm.features.shape[0] == len(ids)
    # The same rows up to the rounding of batches of other sizes (the kept tail goes in a batch of its own).
    torch.testing.assert_close(last, every[-1:], atol=3e-2, rtol=0)
    torch.testing.assert_close(state, lm.features[-1:], atol=3e-2, rtol=0)
    torch_target = tiny_pair(None).target  # the same weights in torch
    hidden = torch_target(ids[None], output_hidden_states=True).hidden_states[-1][0]
    # llama.cpp keeps its KV cache in float16: each row points the same way (an off-by-one row would not)
    cosine = torch.nn.functional.cosine_similarity(lm.features, hidden.detach(), dim=1)
    assert cosine.min() > 0.999, cosine.min()
    lm.close()


def test_the_page_status_names_the_head_with_its_acceptance_and_cost(trained):
    from specviz.app.page import head_html

    pair, _, _, info = trained
    line = head_html(pair)
    assert "drafter <b>head</b>" in line and f"source {info.acceptance['source'][0]:.2f}" in line
    assert "a drafted token costs" in line
    assert head_html(dataclasses.replace(pair, name="tiny-untrained")) == ""  # no head, nothing said
