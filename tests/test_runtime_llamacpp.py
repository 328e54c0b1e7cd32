"""The llama.cpp runtime on tiny float32 GGUF files written in-process (`tiny_gguf`).

- its passes: a tree pass gives each branch's chain logits, keeping a path leaves the cache
  a chain over that path would, and a crop leaves it as a fresh feed would;
- the engine on it: greedy speculative decoding equals plain greedy decoding on the same
  runtime, token for token, for every drafter the runtime supports, trees included;
- bad input: each case is refused with a one-line error naming the file and the runtime,
  and the same process then runs a good request (llama.cpp would abort it otherwise).

Tolerances: logits of a few-token pass and a one-token pass differ in llama.cpp by up to
~3e-4 here (its matrix products sum in another order per batch shape), against logits of
magnitude ~20: ATOL = 2e-3. Keys and values are stored in f16 (llama.cpp's default), so a
value computed in a tree batch may round to the neighbouring f16 of the chain batch's: after
keeping a path, later logits differ by up to ~9e-3 (KEPT_ATOL = 3e-2). Both are far under
what a wrong mask, position or sequence moves (whole units, checked below). Identical
batches give identical logits (asserted exactly).
"""

import pytest
import torch

pytest.importorskip("llama_cpp")

from specviz import engine  # noqa: E402
from specviz.errors import UserError  # noqa: E402
from specviz.lm.llamacpp_runtime.lm import LlamaCppLM  # noqa: E402
from specviz.choices import LLAMACPP  # noqa: E402
from specviz.lm.runtime import open_lm  # noqa: E402
from specviz.lm.llamacpp_runtime.model import LlamaCppModel  # noqa: E402
from specviz.lm.pair import ModelPair  # noqa: E402
from specviz.settings import GenerationSettings  # noqa: E402
from tiny_gguf import tiny_gguf  # noqa: E402
from tiny_models import tiny_tokenizer  # noqa: E402

ATOL = 2e-3
KEPT_ATOL = 3e-2
PROMPT = "Write a function that reverses a string"
TOKENS = [0, 41, 17, 230, 9, 41, 88, 5, 17]
PARENTS = [-1, 0, 0, 0, 1, 1, 2, 4, 6]


def _model(kind="target") -> LlamaCppModel:
    return _models.setdefault(kind, LlamaCppModel(tiny_gguf(kind), threads=1))


_models: dict[str, LlamaCppModel] = {}


def llamacpp_pair(draft: str | None = "close") -> ModelPair:
    tok = tiny_tokenizer()
    return ModelPair(
        name=f"tiny-gguf-{draft or 'solo'}",
        tokenizer=tok,
        target=_model("target"),
        draft=_model(draft) if draft else None,
        vocab_size=len(tok),
        device=torch.device("cpu"),
        dtype=torch.float32,
        runtime=LLAMACPP,
    )


def _context():
    return torch.tensor(tiny_tokenizer()("def reverse(s):\n    return")["input_ids"])


def _branch(leaf):
    path = [leaf]
    while PARENTS[path[-1]] >= 0:
        path.append(PARENTS[path[-1]])
    return path[::-1]


def test_the_model_reads_its_facts_from_the_file():
    m = _model()
    tok = tiny_tokenizer()
    assert m.vocab_size == len(tok)
    assert tok.eos_token_id in m.stop_ids
    assert isinstance(open_lm(m, torch.device("cpu")), LlamaCppLM)


def test_its_tokenizer_agrees_with_the_transformers_one():
    text = "def reverse(s):\n    return s[::-1]\nThe quick brown fox"
    assert _model().tokenize(text) == tiny_tokenizer()(text)["input_ids"]


def test_a_tree_pass_gives_each_branch_its_chain_logits_and_keeps_a_path_as_a_chain():
    ctx = _context()
    lm = LlamaCppLM(_model())
    lm.feed(ctx[:-1])
    tokens = torch.tensor([int(ctx[-1])] + TOKENS[1:])
    logits = lm.feed_tree(tokens, PARENTS)
    assert logits.shape == (len(TOKENS), _model().vocab_size)
    for leaf in (3, 5, 7, 8):
        branch = _branch(leaf)
        ref = LlamaCppLM(_model())
        ref.feed(ctx[:-1])
        want = ref.feed(tokens[branch], keep=0)
        assert torch.allclose(logits[branch], want, atol=ATOL, rtol=0), branch
    path = _branch(7)
    lm.keep_path(path)
    assert lm.length == ctx.numel() - 1 + len(path)
    chain = LlamaCppLM(_model())
    chain.feed(torch.cat([ctx[:-1], tokens[path]]))
    nxt = torch.tensor([33, 12, 7])
    after = lm.feed(nxt, keep=0)
    assert torch.allclose(after, chain.feed(nxt, keep=0), atol=KEPT_ATOL, rtol=0)
    # Had another branch stayed in view, the logits would move by whole units.
    other = LlamaCppLM(_model())
    other.feed(torch.cat([ctx[:-1], tokens[_branch(8)]]))
    assert (after - other.feed(nxt, keep=0)).abs().max() > 1.0


def _fresh_after(ids):
    lm = LlamaCppLM(_model())
    return lm.feed(torch.tensor(ids))


def test_levels_fed_in_separate_passes_see_the_levels_before():
    ctx = _context()
    lm = LlamaCppLM(_model())
    lm.feed(ctx)
    lm.feed_tree(torch.tensor([41, 17, 230]), [-1, -1, -1])
    second = lm.feed_tree(torch.tensor([9, 88, 5]), [0, 1, 1])
    assert torch.allclose(second[2], _fresh_after(ctx.tolist() + [17, 5])[0], atol=ATOL, rtol=0)
    lm.keep_path([1, 5])
    assert torch.allclose(
        lm.feed(torch.tensor([12]))[0], _fresh_after(ctx.tolist() + [17, 5, 12])[0], atol=KEPT_ATOL, rtol=0
    )


def test_a_crop_leaves_the_cache_as_a_fresh_feed_would():
    ctx = _context()
    a = LlamaCppLM(_model())
    a.feed(ctx)
    a.feed(torch.tensor([41, 17, 230, 9]))
    a.crop(ctx.numel())
    after = a.feed(torch.tensor([88, 5]), keep=0)
    b = LlamaCppLM(_model())
    b.feed(ctx)
    assert torch.equal(after, b.feed(torch.tensor([88, 5]), keep=0))  # same batches: bit for bit


def test_a_context_a_finished_run_gave_back_is_taken_again_and_starts_as_a_fresh_one():
    ctx = _context()
    model = LlamaCppModel(tiny_gguf("target"), threads=1)
    first = LlamaCppLM(model)
    fresh = first.feed(ctx, keep=0)
    first.feed(torch.tensor([41, 17, 230]))  # leaves a longer cache behind
    used = first._ctx
    first.close()
    again = LlamaCppLM(model)
    assert again._ctx == used and again.length == 0
    assert torch.equal(again.feed(ctx, keep=0), fresh)  # same batches on an empty cache: bit for bit
    again.close()
    model.close()  # frees the context it kept, and the model
    assert not model._idle


@pytest.mark.parametrize(
    "drafter,draft,extra",
    [
        ("model", "close", {}),
        ("model", "random", {}),
        ("model", "target", {}),
        ("tree", "close", {"tree_nodes": 8, "tree_width": 2}),
        ("tree", "random", {"tree_nodes": 12, "tree_width": 3}),
        ("lookup", None, {}),
        ("suffix", None, {"suffix_max_nodes": 12}),
        ("lookahead", None, {"lookahead_window": 4, "lookahead_ngram": 3, "lookahead_candidates": 4}),
        ("lookahead", None, {"lookahead_window": 3, "lookahead_ngram": 5, "lookahead_candidates": 6}),
    ],
)
@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculative_equals_plain_greedy_on_llamacpp(drafter, draft, extra, k):
    pair = llamacpp_pair(draft)
    base = dict(max_new_tokens=24, k=k, policy="fixed", drafter=drafter, **extra)
    plain = engine.run(pair, PROMPT, GenerationSettings(mode="plain", **base))
    spec = engine.run(pair, PROMPT, GenerationSettings(mode="speculative", **base))
    assert spec.token_ids == plain.token_ids
    assert len(plain.token_ids) == 24 or plain.summary.stop_reason == "eos"
    if draft == "target" and drafter == "model":  # the draft is the target: everything is accepted
        assert spec.summary.accepted == spec.summary.drafted > 0


def test_the_same_draft_file_as_the_target_accepts_every_token_at_temperature_one():
    pair = llamacpp_pair("target")
    trace = engine.run(
        pair,
        PROMPT,
        GenerationSettings(mode="speculative", temperature=1.0, k=4, policy="fixed", max_new_tokens=24, seed=3),
    )
    assert trace.summary.drafted > 0
    assert trace.summary.accepted / trace.summary.drafted > 0.95  # p == q up to batch-shape rounding


def test_early_exit_is_refused_with_the_reason():
    pair = llamacpp_pair(None)
    with pytest.raises(UserError, match="torch runtime only"):
        engine.run(pair, PROMPT, GenerationSettings(mode="speculative", drafter="early-exit", max_new_tokens=4))


def _good_request_still_runs():
    trace = engine.run(
        llamacpp_pair("close"), PROMPT, GenerationSettings(mode="speculative", max_new_tokens=6, k=2, policy="fixed")
    )
    assert len(trace.token_ids) == 6 or trace.summary.stop_reason == "eos"


def test_a_file_llamacpp_cannot_read_is_one_line_naming_file_and_runtime(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)
    with pytest.raises(UserError) as e:
        LlamaCppModel(bad)
    assert "broken.gguf" in str(e.value) and LLAMACPP in str(e.value) and "\n" not in str(e.value)
    notgguf = tmp_path / "weights.gguf"
    notgguf.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(UserError, match="not a GGUF file"):
        LlamaCppModel(notgguf)
    _good_request_still_runs()


def test_an_architecture_llamacpp_lacks_names_it(tmp_path):
    from tiny_gguf import write_gguf
    from tiny_models import tiny_model

    path = write_gguf(tiny_model(0, layers=1), tmp_path / "odd.gguf", architecture="specviz-no-such-arch")
    with pytest.raises(UserError) as e:
        LlamaCppModel(path)
    assert "odd.gguf" in str(e.value) and LLAMACPP in str(e.value) and "specviz-no-such-arch" in str(e.value)
    _good_request_still_runs()


def test_bad_ids_positions_and_a_full_context_are_refused_before_llamacpp_sees_them():
    lm = LlamaCppLM(_model())
    with pytest.raises(UserError, match="outside"):
        lm.feed(torch.tensor([1, 2, _model().vocab_size + 5]))
    with pytest.raises(UserError, match="context"):
        lm.feed(torch.zeros(lm._cells + 1, dtype=torch.long))
    assert lm.length == 0
    with pytest.raises(ValueError):
        lm.feed_tree(torch.tensor([1, 2]), [-1, 5])  # a parent that does not exist
    lm.crop(0)
    with pytest.raises(UserError, match="context window"):
        engine.run(llamacpp_pair("close"), "word " * 3000, GenerationSettings(max_new_tokens=8))
    _good_request_still_runs()


def test_a_pair_with_a_broken_draft_file_is_refused_in_one_line_and_the_next_load_works(tmp_path, monkeypatch):
    # The files are assembled and loaded in a thread beside the tokenizers (llamacpp_runtime/pair.py: _Files):
    # a failure there or in a tokenizer reaches the caller, and nothing waits for ever.
    from specviz.lm import load_pair
    from tiny_gguf import tiny_gguf

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)
    with pytest.raises(UserError) as e:
        load_pair(f"{tiny_gguf('target')} -> {bad}", runtime=LLAMACPP)
    assert "broken.gguf" in str(e.value) and LLAMACPP in str(e.value) and "\n" not in str(e.value)
    pair = load_pair(f"{tiny_gguf('target')} -> {tiny_gguf('close')}", runtime=LLAMACPP)
    assert pair.runtime == LLAMACPP and pair.draft_tokenizer is None and pair.info["vocab"]["method"] == "same"
    assert pair.target_label == tiny_gguf("close").name  # the target (after the arrow), by its file name
    assert (pair.precision_choice.target, pair.precision_choice.draft) == (pair.target.precision, pair.draft.precision)
