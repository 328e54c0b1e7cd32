"""load_pair on tiny random models saved as local folders: caching, sharing, threads, limits."""

from __future__ import annotations

import json
import threading

import pytest
import torch
from tiny_models import tiny_model, tiny_tokenizer
from transformers import Qwen2Config, Qwen2ForCausalLM

from specviz.models import clear_loaded, load_pair, loaded_bytes
from specviz.models.devices import choose_device, choose_dtype
from specviz.models.errors import CustomModelsDisabledError, DeviceError, MemoryBudgetError, UnsafeWeightsError, VocabMismatchError


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECVIZ_DEVICE", "cpu")
    monkeypatch.delenv("SPECVIZ_DTYPE", raising=False)
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
    assert pair.info["draft"]["head_rows"] == pair.info["target"]["head_rows"] == len(tiny_tokenizer())
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and seen[-1][1].endswith("ready")


def test_on_a_cpu_the_draft_runs_in_int8_and_the_target_in_fp32(folders, monkeypatch):
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    spec = " -> ".join(folders)
    seen = []
    pair = load_pair(spec, progress=lambda f, m: seen.append(m))
    assert pair.draft_precision == "int8" and any(m.startswith("quantizing") and m.endswith("linear layers") for m in seen)
    assert any(isinstance(m, Int8Linear) for m in pair.draft.modules())
    assert not any(type(m) is torch.nn.Linear for m in pair.draft.modules())
    assert not any(isinstance(m, Int8Linear) for m in pair.target.modules())
    full = load_pair(spec, int8_draft=False)  # the fp32 draft the int8 one was made from, kept
    assert full.draft_precision == "float32" and full.target is pair.target and full.draft is not pair.draft
    assert not any(isinstance(m, Int8Linear) for m in full.draft.modules())
    assert load_pair(folders[0], with_draft=False).target is full.draft  # never quantized as a target
    assert load_pair(spec, dtype="bfloat16").draft_precision == "bfloat16"  # 16-bit drafts stay as loaded
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
    assert vocab_info["draft_entries"] == len(pair.draft_tokenizer.get_vocab()) and vocab_info["target_entries"] == len(tiny_tokenizer())
    assert "odd-draft and target have different vocabularies" in vocab_info["message"]
    same = load_pair(" -> ".join(folders), int8_draft=False)
    assert not same.cross_tokenizer and same.draft_tokenizer is None and same.info["vocab"]["method"] == "same"


def test_a_draft_whose_head_is_smaller_than_its_own_tokenizer_is_refused(tmp_path, folders):
    config = Qwen2Config(vocab_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    small = save(tmp_path / "small-draft", Qwen2ForCausalLM(config), tiny_tokenizer(chat_template=False))
    with pytest.raises(VocabMismatchError, match="model scores only 8 ids"):
        load_pair(f"{small} -> {folders[1]}", int8_draft=False)


def test_padded_lm_heads_use_the_shared_rows(tmp_path):
    tok = tiny_tokenizer()

    def padded(rows):
        config = Qwen2Config(vocab_size=rows, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
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
    assert choose_dtype(torch.device("cpu")) == torch.float32
    assert choose_dtype(torch.device("cuda")) == torch.bfloat16
    monkeypatch.setenv("SPECVIZ_DTYPE", "float16")
    assert choose_dtype(torch.device("cpu")) == torch.float16
    assert choose_dtype(torch.device("cpu"), "fp32") == torch.float32
    with pytest.raises(DeviceError, match="unknown dtype 'int8'"):
        choose_dtype(torch.device("cpu"), "int8")
    with pytest.raises(DeviceError, match="unknown device"):
        choose_device("tpu-ish")
    bad_cuda = f"cuda:{torch.cuda.device_count() + 3}"
    with pytest.raises(DeviceError):
        choose_device(bad_cuda)
