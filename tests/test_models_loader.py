"""load_pair on tiny random models saved as local folders: caching, sharing, threads, limits."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_model, tiny_tokenizer
from transformers import Qwen2Config, Qwen2ForCausalLM

from specviz.lm import clear_loaded, load_pair, loaded_bytes
from specviz.lm.torch_runtime import devices
from specviz.lm.torch_runtime.devices import choose_device, choose_dtype
from specviz.lm.torch_runtime.precision import choose_precision
from specviz.models.errors import (
    CustomModelsDisabledError,
    DeviceError,
    MemoryBudgetError,
    UnsafeWeightsError,
    VocabMismatchError,
)


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECVIZ_DEVICE", "cpu")
    # auto would time each tiny target in fp32 and bf16; the precision tests below ask for it
    monkeypatch.setenv("SPECVIZ_DTYPE", "float32")
    monkeypatch.delenv("SPECVIZ_INT8_DRAFT", raising=False)
    monkeypatch.delenv("SPECVIZ_MEMORY_BUDGET_GB", raising=False)
    monkeypatch.delenv("SPECVIZ_ALLOW_CUSTOM_MODELS", raising=False)
    clear_loaded()
    yield
    clear_loaded()


def save(folder, model, tokenizer=None):
    model.save_pretrained(folder)
    (tokenizer or tiny_tokenizer()).save_pretrained(folder)
    return str(folder)


@pytest.fixture
def folders(tmp_path):
    return save(tmp_path / "draft", tiny_model(1, layers=2)), save(tmp_path / "target", tiny_model(0))


def test_a_custom_pair_of_folders_loads_ready_for_inference(folders):
    draft_dir, target_dir = folders
    seen = []
    pair = load_pair(f"{draft_dir} -> {target_dir}", progress=lambda f, m: seen.append((f, m)), int8_draft=False)
    assert pair.name == f"{draft_dir} -> {target_dir}"
    assert pair.device == torch.device("cpu") and pair.dtype == torch.float32
    assert pair.vocab_size == len(tiny_tokenizer()) and pair.load_s > 0
    ids = torch.tensor([pair.tokenizer("def reverse(s):").input_ids])
    for loaded, original in ((pair.target, tiny_model(0)), (pair.draft, tiny_model(1, layers=2))):
        assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
        weights = original.state_dict()
        assert all(torch.equal(t, weights[name]) for name, t in loaded.state_dict().items())
        # The loader gives CPU layers the few-row product: the same weights, sums in another order.
        torch.testing.assert_close(loaded(ids).logits, original(ids).logits, rtol=1e-4, atol=1e-4)
    assert pair.info["target"]["kind"] == "folder" and pair.info["draft"]["source"] == draft_dir
    assert pair.target_label == Path(target_dir).name  # a folder is labelled by its name
    assert pair.info["draft"]["head_rows"] == pair.info["target"]["head_rows"] == len(tiny_tokenizer())
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and seen[-1][1].endswith("ready")


def test_on_a_cpu_the_draft_runs_in_int8_and_the_target_in_fp32(folders, monkeypatch):
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    spec = " -> ".join(folders)
    seen = []
    pair = load_pair(spec, progress=lambda f, m: seen.append(m))
    assert pair.draft_precision == "int8" and any(
        m.startswith("quantizing") and m.endswith("linear layers") for m in seen
    )
    assert any(isinstance(m, Int8Linear) for m in pair.draft.modules())
    assert not any(type(m) is torch.nn.Linear for m in pair.draft.modules())
    assert not any(isinstance(m, Int8Linear) for m in pair.target.modules())
    full = load_pair(spec, int8_draft=False)  # the fp32 draft the int8 one was made from, kept
    assert full.draft_precision == "float32" and full.target is pair.target and full.draft is not pair.draft
    assert not any(isinstance(m, Int8Linear) for m in full.draft.modules())
    assert load_pair(folders[0], with_draft=False).target is full.draft  # never quantized as a target
    # beside a bf16 target the draft is still the int8 copy of the float32 draft
    bf16 = load_pair(spec, dtype="bfloat16")
    assert bf16.draft is pair.draft and bf16.draft_precision == "int8" and bf16.target.dtype == torch.bfloat16
    assert load_pair(spec, dtype="bfloat16", int8_draft=False).draft_precision == "bfloat16"
    monkeypatch.setenv("SPECVIZ_INT8_DRAFT", "0")
    assert load_pair(spec) is full


def test_the_int8_copy_of_the_draft_must_fit_in_the_memory_budget(folders, monkeypatch):
    spec = " -> ".join(folders)
    full = load_pair(spec, int8_draft=False)
    held, draft_bytes = loaded_bytes(), 4 * sum(p.numel() for p in full.draft.parameters())
    # Room for half the draft: its int8 copy is made from a full-precision copy.
    monkeypatch.setenv("SPECVIZ_MEMORY_BUDGET_GB", f"{(held + draft_bytes / 2) / 1e9:.12f}")
    with pytest.raises(MemoryBudgetError, match="the int8 copy of the draft"):
        load_pair(spec)
    assert load_pair(spec, int8_draft=False) is full  # what was loaded is still served


def test_pairs_are_cached_and_a_draftless_load_shares_the_target(folders):
    spec = " -> ".join(folders)
    pair = load_pair(spec, int8_draft=False)
    assert load_pair(spec, int8_draft=False) is pair
    solo = load_pair(spec, with_draft=False)
    assert solo.draft is None and solo.target is pair.target
    assert load_pair(folders[1], with_draft=False).target is pair.target
    held = loaded_bytes()
    assert held == 4 * sum(p.numel() for m in (pair.draft, pair.target) for p in m.parameters())


def test_concurrent_requests_share_one_load(folders):
    spec = " -> ".join(folders)
    results, errors = [], []

    def user():
        try:
            results.append(load_pair(spec))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=user) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 4 and all(r is results[0] for r in results)


def test_dtype_from_the_environment(folders, monkeypatch):
    monkeypatch.setenv("SPECVIZ_DTYPE", "bf16")
    pair = load_pair(" -> ".join(folders))
    assert pair.dtype == torch.bfloat16 and pair.target.dtype == torch.bfloat16
    assert load_pair(" -> ".join(folders), dtype="float32") is not pair


def test_a_draft_with_another_vocabulary_loads_with_its_own_tokenizer(tmp_path, folders):
    from tiny_models import CORPUS
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for line in CORPUS for w in line.split()})
    vocab = {w: i for i, w in enumerate(["<unk>"] + words)}
    other = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    other.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    other_tok = PreTrainedTokenizerFast(tokenizer_object=other, unk_token="<unk>")
    draft_model = tiny_model(2, layers=2)
    odd = save(tmp_path / "odd-draft", draft_model, other_tok)
    pair = load_pair(f"{odd} -> {folders[1]}", int8_draft=False)
    assert pair.cross_tokenizer and pair.tokenizer.get_vocab() == tiny_tokenizer().get_vocab()
    assert other_tok.get_vocab().items() <= pair.draft_tokenizer.get_vocab().items()  # saving may add an EOS
    assert pair.vocab_size == len(tiny_tokenizer())  # the target's ids
    vocab_info = pair.info["vocab"]
    assert vocab_info["method"] == pair.vocab_map.method == "text"  # few whole words are target tokens
    assert vocab_info["draft_entries"] == len(pair.draft_tokenizer.get_vocab()) and vocab_info["target_entries"] == len(
        tiny_tokenizer()
    )
    assert "odd-draft and target have different vocabularies" in vocab_info["message"]
    same = load_pair(" -> ".join(folders), int8_draft=False)
    assert not same.cross_tokenizer and same.draft_tokenizer is None and same.info["vocab"]["method"] == "same"


def test_a_draft_whose_head_is_smaller_than_its_own_tokenizer_is_refused(tmp_path, folders):
    config = Qwen2Config(
        vocab_size=8,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    small = save(tmp_path / "small-draft", Qwen2ForCausalLM(config), tiny_tokenizer(chat_template=False))
    with pytest.raises(VocabMismatchError, match="model scores only 8 ids"):
        load_pair(f"{small} -> {folders[1]}", int8_draft=False)


def test_padded_lm_heads_use_the_shared_rows(tmp_path):
    tok = tiny_tokenizer()

    def padded(rows):
        config = Qwen2Config(
            vocab_size=rows,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            tie_word_embeddings=False,
        )
        return Qwen2ForCausalLM(config)

    pair = load_pair((save(tmp_path / "d", padded(len(tok) + 16)), save(tmp_path / "t", padded(len(tok) + 64))))
    assert pair.vocab_size == len(tok) + 16
    assert pair.info["target"]["head_rows"] == len(tok) + 64


def test_a_load_over_the_memory_budget_is_refused_with_sizes(folders, monkeypatch):
    monkeypatch.setenv("SPECVIZ_MEMORY_BUDGET_GB", "0.0001")  # 100 kB
    with pytest.raises(MemoryBudgetError) as err:
        load_pair(" -> ".join(folders))
    message = str(err.value)
    assert "needs 0.0 GB on cpu" in message and "memory budget of 0.0 GB (SPECVIZ_MEMORY_BUDGET_GB)" in message


def test_a_model_that_needs_its_own_code_is_refused(tmp_path, folders):
    strange = tmp_path / "strange"
    save(strange, tiny_model(0))
    config = json.loads((strange / "config.json").read_text())
    config.update(model_type="my-own-arch", auto_map={"AutoModelForCausalLM": "modeling_mine.MyModel"})
    (strange / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsafeWeightsError, match="trust_remote_code"):
        load_pair(str(strange), with_draft=False)


def test_custom_folders_are_refused_when_disabled(folders, monkeypatch):
    monkeypatch.setenv("SPECVIZ_ALLOW_CUSTOM_MODELS", "0")
    with pytest.raises(CustomModelsDisabledError):
        load_pair(" -> ".join(folders))


def test_device_and_dtype_choice(monkeypatch):
    monkeypatch.delenv("SPECVIZ_DEVICE")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert choose_device().type == expected
    monkeypatch.delenv("SPECVIZ_DTYPE")
    # auto: measured on a CPU with native bf16 (None: not decided yet), else fp32; bf16 on CUDA
    monkeypatch.setattr(devices, "native_bf16", lambda: True)
    assert choose_dtype(torch.device("cpu")) is None and choose_dtype(torch.device("cpu"), "auto") is None
    monkeypatch.setattr(devices, "native_bf16", lambda: False)
    assert choose_dtype(torch.device("cpu")) == torch.float32
    assert choose_precision(torch.device("cpu")).reason == "this CPU has no native bf16 arithmetic"
    assert choose_dtype(torch.device("cuda")) == torch.bfloat16
    monkeypatch.setenv("SPECVIZ_DTYPE", "float16")
    assert choose_dtype(torch.device("cpu")) == torch.float16
    assert choose_dtype(torch.device("cpu"), "fp32") == torch.float32
    assert choose_dtype(torch.device("cpu"), "int8") == torch.qint8
    assert choose_precision(torch.device("cpu"), "int8").target == "int8"
    assert devices.load_dtype(devices.dtype_of("int8")) == torch.float32 and devices.dtype_of("int8") == torch.qint8
    with pytest.raises(DeviceError, match="a CPU only"):
        choose_dtype(torch.device("cuda"), "int8")
    with pytest.raises(DeviceError, match="unknown dtype 'int4'"):
        choose_dtype(torch.device("cpu"), "int4")
    with pytest.raises(DeviceError, match="unknown device"):
        choose_device("tpu-ish")
    bad_cuda = f"cuda:{torch.cuda.device_count() + 3}"
    with pytest.raises(DeviceError):
        choose_device(bad_cuda)


def test_auto_picks_the_precision_with_the_cheaper_round_and_caches_it(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECVIZ_DTYPE")
    monkeypatch.setattr(devices, "native_bf16", lambda: True)
    costs = {"float32": {1: 400.0, 8: 970.0}, "bfloat16": {1: 230.0, 8: 230.0}}
    asked = []

    def measure(dtypes):
        asked.append(dtypes)
        return costs

    path = tmp_path / "precision.json"
    cpu = torch.device("cpu")
    chosen = choose_precision(cpu, "auto", cache_file=path, measure=measure)
    assert chosen.target == "bfloat16" and asked == [(torch.float32, torch.bfloat16)]
    assert (
        chosen.reason.startswith("measured faster")
        and "V(1) 400 ms" in chosen.reason
        and "V(8) 230 ms" in chosen.reason
    )
    again = choose_precision(cpu, cache_file=path, measure=lambda d: pytest.fail("measured twice"))
    assert again.target == "bfloat16" and again.measured == chosen.measured and "cached" in again.reason
    # a slow multi-token pass loses even with the faster one-token pass: V(1) + V(8) decides
    costs = {"float32": {1: 200.0, 8: 300.0}, "bfloat16": {1: 190.0, 8: 320.0}}
    assert choose_precision(cpu, cache_file=tmp_path / "other.json", measure=measure).target == "float32"
    path.write_text("{damaged")
    assert choose_precision(cpu, cache_file=path, measure=measure).target == "float32"  # measured again


def test_auto_on_a_cpu_times_the_target_in_both_precisions_once(folders, monkeypatch, tmp_path):
    from specviz.lm import timing

    monkeypatch.delenv("SPECVIZ_DTYPE")
    monkeypatch.setattr(devices, "native_bf16", lambda: True)
    timed = []

    def pass_ms(model, device, vocab_size, sizes, **kw):
        timed.append(next(model.parameters()).dtype)
        return {1: 100.0, 8: 120.0} if timed[-1] == torch.bfloat16 else {1: 150.0, 8: 400.0}

    monkeypatch.setattr(timing, "target_pass_ms", pass_ms)
    spec = " -> ".join(folders)
    seen = []
    pair = load_pair(spec, progress=lambda f, m: seen.append((f, m)))
    assert timed == [torch.float32, torch.bfloat16]
    assert pair.dtype == torch.bfloat16 and pair.target.dtype == torch.bfloat16 and pair.precision == "bfloat16"
    chosen = pair.precision_choice
    assert chosen.target == "bfloat16" and chosen.reason.startswith("measured faster")
    assert chosen.draft == "int8" and chosen.draft_reason == "the default on a CPU"
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    # held: the bf16 target, the float32 draft and its int8 copy; not the float32 target timed
    draft_fp32 = 4 * sum(p.numel() for p in tiny_model(1, layers=2).parameters())
    assert loaded_bytes() == 2 * sum(p.numel() for p in pair.target.parameters()) + draft_fp32 + draft_fp32 // 2
    clear_loaded()
    assert load_pair(spec).dtype == torch.bfloat16 and len(timed) == 2  # the decision was cached
    clear_loaded()
    for path in (tmp_path / "cache" / "precision").iterdir():
        path.unlink()
    assert load_pair(spec).dtype == torch.bfloat16 and len(timed) == 4  # measured again, without a progress bar


def test_each_precision_is_timed_through_the_engines_loop(folders, monkeypatch, tmp_path):
    """The precision a run pays for is the one its loop runs fastest: the load times each
    through that loop (real passes of the tiny target), never through transformers' forward."""
    from specviz.lm import timing
    from specviz.lm.torch_runtime import forward_timing
    from specviz.lm.torch_runtime.lean import lean_supported
    from specviz.lm.torch_runtime import precision

    monkeypatch.delenv("SPECVIZ_DTYPE")
    monkeypatch.setattr(devices, "native_bf16", lambda: True)
    monkeypatch.setattr(
        forward_timing, "measure_pass_ms", lambda *a, **k: pytest.fail("timed through transformers' forward")
    )
    timed = []
    real = timing.chain_pass_ms

    def recorded(model, *args, **kw):
        timed.append(next(model.parameters()).dtype)
        return real(model, *args, **kw)

    monkeypatch.setattr(timing, "chain_pass_ms", recorded)
    pair = load_pair(" -> ".join(folders))
    assert lean_supported(pair.target)  # so the loop timed is specviz's own, not a fallback
    assert timed == [torch.float32, torch.bfloat16]
    chosen = precision.read(precision.cache_file(pair_key(folders), torch.device("cpu")))
    assert chosen is not None and chosen.target == pair.precision and set(chosen.measured) == {"float32", "bfloat16"}


def test_a_damaged_precision_cache_is_measured_again(tmp_path):
    from specviz.lm.torch_runtime import precision

    path = tmp_path / "precision.json"
    for costs in ({"garbage": {"1": 1.0, "8": 2.0}}, {"int8": {"1": 1.0, "8": 2.0}}, {"float32": {"1": 1.0}}):
        path.write_text(json.dumps({"chosen": "float32", "costs": costs}))
        assert precision.read(path) is None
    path.write_text(json.dumps({"chosen": "float32", "costs": {"fp32": {"1": 3.0, "8": 4.0}}}))
    assert precision.read(path).target == "float32"  # a short name is read as the dtype's name


def pair_key(folders):
    from specviz.models.catalogue.sources import resolve

    return resolve(" -> ".join(folders)).target.key


def test_an_int8_target_is_quantized_like_the_draft_and_decodes(folders):
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    from specviz import engine
    from specviz.settings import GenerationSettings

    pair = load_pair(" -> ".join(folders), dtype="int8")
    assert pair.dtype == torch.qint8 and pair.precision == "int8" and pair.draft_precision == "int8"
    assert any(isinstance(m, Int8Linear) for m in pair.target.modules())
    chosen = pair.precision_choice
    assert (chosen.target, chosen.reason, chosen.draft) == ("int8", "chosen", "int8")
    plain = engine.run(pair, "def reverse(s):", GenerationSettings(max_new_tokens=8, mode="plain", raw=True))
    spec = engine.run(pair, "def reverse(s):", GenerationSettings(max_new_tokens=8, k=3, raw=True))
    assert len(plain.token_ids) == 8 and plain.meta["dtype"] == "int8"
    # Not compared token for token: dynamic int8 scales activations per pass, so a verify pass
    # over several tokens rounds differently from one-token passes.
    assert len(spec.token_ids) == 8 and spec.meta["dtype"] == "int8"
    fp32 = load_pair(" -> ".join(folders), dtype="int8", int8_draft=False)
    assert fp32.target is pair.target and fp32.draft_precision == "float32"
