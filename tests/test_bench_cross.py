"""The bench on a pair whose draft has its own tokenizer: sv-text and sv-intersection beside
transformers' `assistant_tokenizer=` generation (hf-universal), the methods refused on the
wrong kind of pair, and the targets that compare them. Tiny models; no speed is asserted."""

from __future__ import annotations

import pytest
import torch
from test_cross_vocab import cross_pair, draft_model, draft_tokenizer, encode, plain_greedy
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

from specviz.workshop.bench import hf_baselines
from specviz.workshop.bench.cli import bench
from specviz.workshop.bench.harness import BenchOptions, eos_ids, prompt_ids
from specviz.workshop.bench.methods import Method, Sample, check_pair, default_methods, parse_method, sv_settings
from specviz.workshop.bench.prompts import BenchPrompt
from specviz.workshop.bench.report import markdown
from specviz.workshop.bench.summary import summarise
from specviz.cost_model import CostModel
from specviz.errors import UserError
from specviz.lm.torch_runtime.int8_draft import quantized
from specviz.lm.pair import ModelPair
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPTS = [BenchPrompt("code", "code", "def reverse(s):"), BenchPrompt("prose", "prose", "The quick brown fox")]
GREEDY_TEXT = "sv-text vs transformers greedy, through text (geomean tokens/s)"
SAMPLING_INTERSECTION = "sv-intersection vs transformers sampling, vocabulary intersection (geomean tokens/s)"


def costed(pair: ModelPair) -> ModelPair:
    """The pair with a fixed cost model, so the runs need not time the models first and the
    cost-aware policy does not depend on how busy the machine is."""
    pair.cost_model = CostModel(verify={n: 10.0 + 1.5 * (n - 1) for n in range(1, 18)}, draft=1.0)
    return pair


def test_cross_tokenizer_method_names_parse():
    assert parse_method("sv-text") == Method("sv-text", "sv", "speculative", vocab_method="text")
    assert parse_method("sv-intersection") == Method(
        "sv-intersection", "sv", "speculative", vocab_method="intersection"
    )
    assert parse_method("hf-universal") == Method("hf-universal", "hf", "universal")
    assert parse_method("hf-universal-k4") == Method("hf-universal-k4", "hf", "universal", k=4)
    for bad in ("hf-universal-k0", "hf-universal-k17", "sv-texts", "hf-universe"):
        with pytest.raises(UserError):
            parse_method(bad)
    # the two sv methods are the page's defaults (cost-aware, model drafter) with the vocab method pinned
    base = GenerationSettings(temperature=0.0, max_new_tokens=8)
    for name, vocab in (("sv-text", "text"), ("sv-intersection", "intersection")):
        s = sv_settings(parse_method(name), base, k_max=4)
        assert (s.mode, s.drafter, s.policy, s.k, s.vocab_method) == ("speculative", "model", "cost-aware", 4, vocab)
    assert sv_settings(parse_method("sv-adaptive"), base, k_max=4).vocab_method == "auto"


def test_the_defaults_for_a_cross_tokenizer_pair_run_on_it():
    names = default_methods([2, 4], cross_tokenizer=True)
    assert {"hf-plain", "hf-universal", "hf-universal-k2", "sv-text", "sv-intersection"} <= set(names)
    assert not any(n.startswith(("hf-assisted", "sv-tree")) for n in names)
    check_pair(cross_pair(), [parse_method(n) for n in names])  # refuses nothing
    check_pair(tiny_pair("close"), [parse_method(n) for n in default_methods([2, 4])])


@pytest.mark.parametrize("name", ["hf-assisted", "hf-assisted-k2"])
def test_same_tokenizer_assisted_generation_is_refused_on_a_cross_pair_naming_hf_universal(name):
    with pytest.raises(UserError, match=rf"{name}.*use hf-universal"):
        bench(
            cross_pair(),
            PROMPTS,
            [parse_method("hf-plain"), parse_method(name)],
            BenchOptions(max_new_tokens=4),
            command="test",
            load_s=0.0,
        )


@pytest.mark.parametrize("name", ["sv-text", "sv-intersection", "hf-universal", "hf-universal-k3"])
def test_cross_tokenizer_methods_are_refused_on_a_same_tokenizer_pair(name):
    with pytest.raises(UserError, match=rf"shares the target's tokenizer: {name}\b"):
        bench(
            tiny_pair("close"),
            PROMPTS,
            [parse_method(name)],
            BenchOptions(max_new_tokens=4),
            command="test",
            load_s=0.0,
        )


def test_greedy_bench_gives_the_targets_plain_greedy_tokens_for_every_method():
    pair = costed(cross_pair())
    names = ["sv-text", "sv-intersection", "hf-universal", "hf-plain"]
    n = 8
    result = bench(
        pair,
        PROMPTS,
        [parse_method(x) for x in names],
        BenchOptions(max_new_tokens=n, k_max=4),
        command="test",
        load_s=0.0,
    )
    summ = result["summary"]
    stop = set(eos_ids(pair))
    for p in PROMPTS:
        # the target's own greedy continuation, decoded here without the bench or the engine
        expected = plain_greedy(pair.target, encode(p.prompt), n)
        for name in names:
            got = result["samples"][p.id][name][0]["token_ids"]
            assert got == expected[: len(got)], (p.id, name)
            assert len(got) == n or got[-1] in stop, (p.id, name, got)
            assert summ["per_prompt"][p.id][name]["identical"] is True
        for name in ("sv-text", "sv-intersection"):
            row = summ["per_prompt"][p.id][name]
            assert 0.0 <= row["acceptance"] <= 1.0 and row["tokens_per_round"] >= 1.0
        assert (
            result["samples"][p.id]["hf-universal"][0]["hf_generator"]
            == "AssistedCandidateGeneratorDifferentTokenizers"
        )
    assert summ["mismatches"] == []
    assert (
        result["meta"]["vocab"]["default_method"] in ("text", "intersection")
        and 0 < result["meta"]["vocab"]["overlap"] < 1
    )
    targets = {t["target"]: t for t in summ["targets"]}
    text = targets[GREEDY_TEXT]
    ov = summ["overall"]
    assert text["goal"] == ">= 1.00" and text["met"] == (text["value"] >= 1.0)
    assert text["value"] == pytest.approx(ov["sv-text"]["tokens_per_s"] / ov["hf-universal"]["tokens_per_s"])
    info = targets["sv-intersection vs transformers greedy, through text (geomean tokens/s)"]
    assert info["goal"] == "(for information)" and info["met"] is None
    table = markdown(result)
    assert "Every method produced the same tokens" in table and "| sv-text |" in table
    assert "hf-universal: AssistedCandidateGeneratorDifferentTokenizers" in table


def test_sampling_runs_transformers_intersection_generator_and_leaves_the_draft_as_it_was():
    pair = costed(cross_pair())
    layers = (pair.draft.get_input_embeddings(), pair.draft.get_output_embeddings())
    names = ["sv-intersection", "hf-universal"]
    opts = BenchOptions(max_new_tokens=6, k_max=3, temperature=0.7, warmup=False)
    result = bench(pair, PROMPTS[:1], [parse_method(x) for x in names], opts, command="test", load_s=0.0)
    sample = result["samples"]["code"]["hf-universal"][0]
    assert sample["hf_generator"] == "UniversalSpeculativeDecodingGenerator" and 1 <= sample["new_tokens"] <= 6
    # transformers prunes the draft's head for this generator; the shared draft gets its own layers back
    assert (pair.draft.get_input_embeddings(), pair.draft.get_output_embeddings()) == layers
    targets = {t["target"]: t for t in result["summary"]["targets"]}
    assert targets[SAMPLING_INTERSECTION]["goal"] == ">= 1.00" and targets[SAMPLING_INTERSECTION]["met"] is not None
    assert not any(t["target"].startswith("sv-text") for t in result["summary"]["targets"])  # not in this run
    # and the draft still drafts as before: a greedy run after it still gives the target's tokens
    after = bench(
        pair,
        PROMPTS[1:],
        [parse_method("sv-text"), parse_method("hf-plain")],
        BenchOptions(max_new_tokens=6, k_max=3, warmup=False),
        command="test",
        load_s=0.0,
    )
    assert after["summary"]["overall"]["sv-text"]["identical"] is True


def test_an_int8_draft_runs_transformers_sampling_without_pruning_its_head():
    base = cross_pair()
    draft = quantized(draft_model())
    pair = ModelPair(
        name="tiny-cross-int8",
        tokenizer=base.tokenizer,
        target=base.target,
        draft=draft,
        vocab_size=base.vocab_size,
        device=base.device,
        dtype=base.dtype,
        draft_tokenizer=draft_tokenizer(),
    )
    head = draft.get_output_embeddings()
    assert type(head) is not torch.nn.Linear  # quantized: transformers' prune_linear_layer cannot read it
    settings = GenerationSettings(temperature=0.7, max_new_tokens=5)
    config = hf_baselines.generation_config(
        max_new_tokens=5,
        temperature=0.7,
        top_k=settings.top_k,
        top_p=settings.top_p,
        eos_ids=eos_ids(pair),
        pad_id=pair.tokenizer.pad_token_id,
    )
    run = hf_baselines.generate(
        pair.target,
        prompt_ids(pair, "def reverse(s):", settings),
        config,
        seed=0,
        assistant=draft,
        tokenizer=pair.tokenizer,
        assistant_tokenizer=pair.draft_tokenizer,
    )
    assert 1 <= len(run.token_ids) <= 5 and all(0 <= t < pair.vocab_size for t in run.token_ids)
    assert run.generator == "UniversalSpeculativeDecodingGenerator" and run.target_calls >= 1
    assert draft.get_output_embeddings() is head


def _sample(ids, wall, **stats):
    return Sample(token_ids=list(ids), wall_s=wall, stats=stats)


def test_universal_targets_compare_with_the_fastest_transformers_setting():
    methods = [parse_method(n) for n in ("hf-plain", "hf-universal", "hf-universal-k2", "sv-text", "sv-intersection")]
    same = [1, 2, 3, 4]
    spec = dict(acceptance=0.5, tokens_per_round=1.5, mean_k=2.0)
    raw = {  # 4 tokens each: tokens/s = 4 / wall
        "a": {
            "hf-plain": [_sample(same, 4.0)],
            "hf-universal": [_sample(same, 2.0)],
            "hf-universal-k2": [_sample(same, 1.0)],
            "sv-text": [_sample(same, 2.0, **spec)],
            "sv-intersection": [_sample(same, 0.5, **spec)],
        },
        "b": {
            "hf-plain": [_sample(same, 4.0)],
            "hf-universal": [_sample(same, 2.0)],
            "hf-universal-k2": [_sample(same, 8.0)],
            "sv-text": [_sample(same, 1.0, **spec)],
            "sv-intersection": [_sample(same, 2.0, **spec)],
        },
    }
    prompts = [BenchPrompt("a", "code", "x"), BenchPrompt("b", "prose", "y")]
    # geomean tok/s: hf-universal 2, hf-universal-k2 sqrt(4 * 0.5) = 1.41, sv-text sqrt(2 * 4) = 2.83,
    # sv-intersection sqrt(8 * 2) = 4
    greedy = {t["target"]: t for t in summarise(raw, prompts, methods, BenchOptions(), stop=set())["targets"]}
    assert greedy[GREEDY_TEXT]["value"] == pytest.approx(2**0.5) and greedy[GREEDY_TEXT]["met"] is True
    assert "hf-universal" in greedy[GREEDY_TEXT]["detail"]
    raw["a"]["hf-universal-k2"] = [_sample(same, 0.25)]  # now 16 and 0.5: geomean sqrt(8) = 2.83, the fastest
    s = summarise(raw, prompts, methods, BenchOptions(temperature=0.7), stop=set())
    sampling = {t["target"]: t for t in s["targets"]}
    assert (
        sampling[SAMPLING_INTERSECTION]["value"] == pytest.approx(4 / 8**0.5)
        and sampling[SAMPLING_INTERSECTION]["met"] is True
    )
    assert sampling[SAMPLING_INTERSECTION]["detail"].endswith("hf-universal-k2")
    text = sampling["sv-text vs transformers sampling, vocabulary intersection (geomean tokens/s)"]
    assert text["value"] == pytest.approx(1.0) and text["met"] is None
    assert s["best_assisted"] == "hf-universal-k2"
    assert s["overall"]["sv-text"]["acceptance"] == 0.5 and s["overall"]["sv-text"]["tokens_per_round"] == 1.5


def test_the_command_compares_the_cross_tokenizer_methods_by_default(tmp_path, monkeypatch):
    import argparse
    import json

    import specviz.lm
    from specviz.workshop.bench import cli

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(specviz.lm, "load_pair", lambda name, **kw: costed(cross_pair()))
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    out = tmp_path / "out"
    assert (
        cli.run(
            parser.parse_args(
                [
                    "--pair",
                    "tiny-cross",
                    "--limit",
                    "1",
                    "--max-new-tokens",
                    "3",
                    "--k",
                    "2",
                    "--no-warmup",
                    "--out",
                    str(out),
                ]
            )
        )
        == 0
    )
    data = json.loads((out / "bench.json").read_text())
    assert [m["name"] for m in data["methods"]] == [
        "hf-plain",
        "hf-universal",
        "hf-universal-k2",
        "sv-plain",
        "sv-k2",
        "sv-text",
        "sv-intersection",
    ]
    assert data["summary"]["overall"]["hf-universal-k2"]["identical"] is True
