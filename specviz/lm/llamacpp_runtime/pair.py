"""A ModelPair on the llama.cpp runtime: the GGUF files as they are, no conversion.

Each model's GGUF (a bundled one assembled from its parts once, or the user's file) is
loaded by llama.cpp (`lm.llamacpp_runtime.model`). The page, the engine and the traces still work in
a transformers tokenizer (chat template, text of every token); transformers builds one from
a GGUF in tens of seconds, so it is built once per file and cached as a tokenizer folder
(or taken from the torch runtime's converted folder where that exists).
"""

from __future__ import annotations

import struct
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch

from specviz.choices import LLAMACPP
from specviz.errors import UserError
from specviz.models.files import cache
from specviz.models.files.convert import ensure_gguf
from specviz.models.files.gguf_info import vocabulary_digest
from specviz.lm.llamacpp_runtime.library import default_threads, version
from specviz.lm.llamacpp_runtime.model import LlamaCppModel
from specviz.lm import resident
from specviz.lm.loader import assemble, converted_folder, failure, roles
from specviz.lm.pair import ModelPair, PrecisionChoice
from specviz.models.progress import Progress, Steps
from specviz.models.catalogue.sources import ModelRef, Plan
from specviz.models.alignment.vocab import same_tokenizer_files


def _close(pair: ModelPair) -> None:
    """Free an unloaded pair's llama.cpp models; a model still running a pass is freed when
    that pass gives its context back."""
    for model in (pair.target, pair.draft):
        if model is not None:
            model.close()


_pairs = resident.Pairs(_close)


def load_llamacpp_pair(plan: Plan, *, threads: int | None = None, progress: Progress | None = None) -> ModelPair:
    """The pair of `plan` in llama.cpp, loaded once per process and thread count."""
    threads = threads or default_threads()
    return _pairs.get((plan.name, plan.draft is not None, threads), lambda: _load(plan, threads, progress))


def _load(plan: Plan, threads: int, progress: Progress | None) -> tuple[ModelPair, int]:
    """The pair of `plan` and the bytes its models hold."""
    start = time.perf_counter()
    steps = Steps(progress, {f"{s} {role}": 1.0 for s in ("file", "tokenizer", "load") for role, _ in roles(plan)})
    files = _Files(roles(plan), plan.name, threads, steps)
    tokenizers, folders = {}, {}
    info = {"runtime": LLAMACPP, "llama-cpp-python": version(), "threads": threads}
    for role, ref in roles(plan):
        path = files.path(role)
        if role == "draft" and _same_vocabulary(path, files.path("target")):
            tokenizers[role] = tokenizers["target"]  # one vocabulary: nothing to build
            continue
        folders[role] = tokenizer_folder(ref, path, steps.step(f"tokenizer {role}"))
        shared = role == "draft" and same_tokenizer_files(folders[role], folders["target"])
        tokenizers[role] = tokenizers["target"] if shared else _load_tokenizer(folders[role])
    models = {role: files.model(role) for role, _ in roles(plan)}
    for role, ref in roles(plan):
        info[role] = {
            "label": ref.label,
            "file": str(models[role].path),
            "model": models[role].description,
            "bytes": models[role].size_bytes,
            "source": ref.kind,
        }
    pair = assemble(
        plan,
        tokenizers,
        models,
        info,
        start,
        device=torch.device("cpu"),
        dtype=torch.float32,
        runtime=LLAMACPP,
        precision_choice=_precision(models),
    )
    steps.finish(f"{plan.name} ready on {LLAMACPP}")
    return pair, sum(m.size_bytes for m in models.values())


def _precision(models: dict[str, LlamaCppModel]) -> PrecisionChoice:
    draft = models.get("draft")
    return PrecisionChoice(
        models["target"].precision,
        "the GGUF file's own, run by llama.cpp",
        *((draft.precision, "the GGUF file's own") if draft else ()),
    )


def _same_vocabulary(a: Path, b: Path) -> bool:
    """Whether two GGUF files' tokenizer metadata say the same ids (`vocabulary_digest`); a
    file whose header cannot be read is left to llama.cpp and the tokenizer to refuse."""
    try:
        return vocabulary_digest(a) == vocabulary_digest(b)
    except (OSError, ValueError, struct.error):
        return False


class _Files:
    """Each role's GGUF file (assembled once from its parts) and its llama.cpp model, made one
    after the other in a background thread while the caller builds the tokenizers: assembling
    and loading wait on the disk and on C code, building a tokenizer on Python."""

    def __init__(self, roles: list[tuple[str, ModelRef]], name: str, threads: int, steps: Steps):
        self._paths = {role: Future() for role, _ in roles}
        self._models = {role: Future() for role, _ in roles}
        args = (roles, name, threads, steps)
        threading.Thread(target=self._run, args=args, name=f"gguf {name}", daemon=True).start()

    def _run(self, roles, name, threads, steps) -> None:
        for futures, make in (
            (self._paths, lambda role, ref: gguf_file(ref, name, role, steps.step(f"file {role}"))),
            (self._models, lambda role, ref: self._load(role, ref, threads, steps)),
        ):
            for role, ref in roles:
                try:
                    futures[role].set_result(make(role, ref))
                except BaseException as e:  # the caller's wait raises it
                    for f in (*self._paths.values(), *self._models.values()):
                        if not f.done():
                            f.set_exception(e)
                    return

    def _load(self, role: str, ref: ModelRef, threads: int, steps: Steps) -> LlamaCppModel:
        steps.step(f"load {role}")(0.0, f"loading {ref.label} in {LLAMACPP}")
        return LlamaCppModel(self.path(role), threads=threads)

    def path(self, role: str) -> Path:
        return self._paths[role].result()

    def model(self, role: str) -> LlamaCppModel:
        return self._models[role].result()


def gguf_file(ref: ModelRef, name: str, role: str, progress: Progress) -> Path:
    """The GGUF file llama.cpp runs for `ref`: a bundled one assembled (once) from its parts."""
    if ref.kind == "bundled":
        return ensure_gguf(ref.bundled, f"{name} ({role})", progress)
    if ref.kind == "gguf":
        return Path(ref.location)
    raise UserError(
        f"{name} ({role}): {ref.label} is a transformers model, not a GGUF file: the {LLAMACPP} runtime runs "
        "GGUF files; use the torch runtime for it"
    )


def tokenizer_folder(ref: ModelRef, path: Path, progress: Progress) -> Path:
    """A folder holding the transformers tokenizer of the GGUF at `path`, built once."""
    converted = converted_folder(ref)
    if cache.folder_is_valid(converted):
        return converted
    folder = cache.cache_root() / "tokenizers" / converted.name
    if cache.folder_is_valid(folder):
        return folder
    with cache.locked(f"tokenizer-{folder.name}"):
        if not cache.folder_is_valid(folder):
            progress(0.0, f"reading the tokenizer of {path.name} (once; cached after)")
            cache.build_folder(folder, lambda tmp: _save_tokenizer(path, tmp))
    return folder


def _save_tokenizer(path: Path, out: Path) -> dict:
    try:
        tok = _gguf_tokenizer(path)
    except Exception as e:
        raise UserError(f"{path}: could not read its tokenizer for {LLAMACPP} ({failure(e)})") from e
    tok.save_pretrained(out)
    return {"source": {"gguf": path.name, "size": path.stat().st_size}, "tokenizer only": True}


def _gguf_tokenizer(path: Path) -> Any:
    """transformers' tokenizer for the GGUF at `path`. AutoTokenizer first parses the whole
    file for its config, only to learn the tokenizer class, which costs more than building the
    tokenizer; the class is read from the architecture in the metadata instead, where
    transformers maps one. Either way the tokenizer is built by transformers from the
    file's metadata."""
    from transformers import AutoTokenizer
    from transformers.integrations.gguf.reader import read_gguf_metadata
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES, tokenizer_class_from_name

    metadata, _ = read_gguf_metadata(str(path), ())
    name = TOKENIZER_MAPPING_NAMES.get(str(metadata.get("general.architecture")))
    names = [name] if isinstance(name, str) else [n for n in (name or ()) if n]
    cls = tokenizer_class_from_name(names[-1]) if names else None
    if cls is None:
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return cls.from_pretrained(str(path.parent), gguf_file=path.name)


def _load_tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))
