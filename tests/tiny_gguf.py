"""Tiny float32 GGUF files written in-process from the tiny Qwen2 models (`tiny_models`),
so the llama.cpp runtime is tested on real llama.cpp passes with no download.

The tensors are the torch model's own weights under llama.cpp's names (Qwen2's rotary
layout is llama.cpp's NEOX one, so nothing is permuted); the vocabulary is the tiny
byte-level BPE's, with its merges, so llama.cpp's own tokenizer loads it too.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

from tiny_models import tiny_model, tiny_tokenizer

_DIR = Path(tempfile.mkdtemp(prefix="specviz-tiny-gguf-"))


def write_gguf(model, path: Path, *, architecture: str = "qwen2") -> Path:
    import gguf

    tok = tiny_tokenizer()
    c = model.config
    w = gguf.GGUFWriter(str(path), architecture)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    theta = (getattr(c, "rope_parameters", None) or {}).get("rope_theta") or getattr(c, "rope_theta", 10000.0)
    w.add_rope_freq_base(float(theta))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    specials = set(tok.all_special_tokens)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens])
    merges = tok.backend_tokenizer.model.__getstate__()
    import json

    state = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in state])
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    names = {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
    }
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    if not c.tie_word_embeddings:
        w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(c.num_hidden_layers):
        for hf, gg in names.items():
            for kind in ("weight", "bias"):
                key = f"model.layers.{i}.{hf}.{kind}"
                if key in sd:
                    w.add_tensor(f"blk.{i}.{gg}.{kind}", sd[key])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    del merges
    return path


@functools.lru_cache(maxsize=None)
def tiny_gguf(kind: str = "target", seed: int = 0, layers: int = 4) -> Path:
    """A GGUF file of a tiny model: "target" (`tiny_model(seed)`), "close" (its noisy
    twin, as `tiny_pair("close")` drafts), "random" (an unrelated 2-layer model)."""
    from tiny_models import CLOSE_NOISE

    models = {
        "target": lambda: tiny_model(seed, layers=layers),
        "close": lambda: tiny_model(seed + 1000, layers=layers, noise_from=seed, noise=CLOSE_NOISE),
        "random": lambda: tiny_model(seed + 1, layers=2),
    }
    return write_gguf(models[kind](), _DIR / f"{kind}-{seed}-{layers}.gguf")


def np_logits(x) -> np.ndarray:
    return x.detach().float().numpy()
