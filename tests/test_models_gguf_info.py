"""Reading a GGUF header for its quantisation and size, checked against gguf's own writer."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGUFWriter, LlamaFileType

from specviz.models.files.gguf_info import describe, read_header, vocabulary_digest


@pytest.fixture
def small_gguf(tmp_path):
    path = tmp_path / "small.gguf"
    w = GGUFWriter(str(path), "qwen2")
    w.add_name("small test model")
    w.add_file_type(LlamaFileType.MOSTLY_F16)
    w.add_token_list(["<unk>", "a", "b", "ü", "日本"] * 50)  # a string array, skipped by the reader
    w.add_token_scores([0.5] * 250)  # a numeric array
    w.add_tensor("token_embd.weight", np.zeros((250, 8), dtype=np.float16))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("output.weight", np.zeros((250, 8), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_header_gives_file_type_tensor_types_and_parameters(small_gguf):
    meta, tensors = read_header(small_gguf)
    assert meta["general.name"] == "small test model" and meta["general.architecture"] == "qwen2"
    assert [(name, shape) for name, shape, _ in tensors] == [
        ("token_embd.weight", (250, 8)),
        ("blk.0.attn_norm.weight", (8,)),
        ("output.weight", (250, 8)),
    ]
    assert describe(small_gguf) == {"quant": "GGUF F16 (2 F16, 1 F32 tensors)", "params": 2 * 250 * 8 + 8}


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_header(path)


def _with_tokenizer(
    path, *, tokens=("<unk>", "a", "b", "ab"), merges=("a b",), eos=0, template=None, name="m", weights=0.0
):
    w = GGUFWriter(str(path), "qwen2")
    w.add_name(name)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(list(tokens))
    w.add_token_merges(list(merges))
    w.add_eos_token_id(eos)
    if template is not None:
        w.add_chat_template(template)
    w.add_tensor("token_embd.weight", np.full((len(tokens), 8), weights, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_files_that_turn_text_into_the_same_ids_share_a_vocabulary_digest(tmp_path):
    base = vocabulary_digest(_with_tokenizer(tmp_path / "base.gguf", template="{{ a }}"))
    # other weights, name and chat template: the ids are the same
    assert (
        vocabulary_digest(_with_tokenizer(tmp_path / "same.gguf", template="{{ b }}", name="other", weights=1.0))
        == base
    )
    assert vocabulary_digest(_with_tokenizer(tmp_path / "none.gguf")) == base
    # any change to what maps text to ids is a different vocabulary
    for changed in ({"tokens": ("<unk>", "a", "b", "ba")}, {"merges": ("b a",)}, {"eos": 1}):
        assert vocabulary_digest(_with_tokenizer(tmp_path / "changed.gguf", **changed)) != base, changed
