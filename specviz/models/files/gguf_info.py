"""What a GGUF file holds (file type, tensor types, parameter count), read from its header.

gguf's GGUFReader builds an object per metadata entry, ~150k of them for a tokenizer, which
takes 15-40 s here; this walks the header once and skips what it does not need.
Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import mmap
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

# Metadata value types -> struct format of a fixed-size value (8: string, 9: array).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class _Header:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str:
        n = self.take("Q")
        s = bytes(self.data[self.pos : self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return s

    def value(self, kind: int, keep: bool):
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.take("IQ")
            if item in _SCALARS and not keep:  # skip fixed-size arrays in one step
                self.pos += count * struct.calcsize(_SCALARS[item])
                return None
            if item == _STRING and not keep:  # skip strings by their lengths, decoding none
                for _ in range(count):
                    self.pos += 8 + self.take("Q")
                return None
            values = [self.value(item, keep) for _ in range(count)]
            return values if keep else None
        raise ValueError(f"unknown GGUF metadata type {kind}")


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[tuple[_Header, int, int]]:
    """(a reader at the first metadata entry, tensor count, metadata entry count)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        h = _Header(data)
        h.pos = 4
        _version, n_tensors, n_meta = h.take("IQQ")
        yield h, n_tensors, n_meta


def _entries(h: _Header, n_meta: int, keep) -> Iterator[tuple[str, object, int]]:
    """(key, value if `keep(key)` else None, where the entry starts) for each metadata entry."""
    for _ in range(n_meta):
        start = h.pos
        key = h.string()
        yield key, h.value(h.take("I"), keep=keep(key)), start


def read_header(
    path: Path, keep: tuple[str, ...] = ("general.file_type", "general.name", "general.architecture")
) -> tuple[dict, list[tuple[str, tuple[int, ...], int]]]:
    """(the metadata entries named in `keep`, [(tensor name, shape, ggml type), ...])."""
    with _opened(path) as (h, n_tensors, n_meta):
        meta = {key: value for key, value, _ in _entries(h, n_meta, keep.__contains__) if key in keep}
        tensors = []
        for _ in range(n_tensors):
            name = h.string()
            dims = h.take("I")
            shape = tuple(h.take(f"{dims}Q")) if dims > 1 else (h.take("Q"),)
            shape = shape[::-1]  # GGUF lists the fastest-moving dimension first, torch last
            _kind_offset = h.take("IQ")
            tensors.append((name, shape, _kind_offset[0]))
    return meta, tensors


# Not part of the ids: a run builds its prompt with the target's template.
NOT_VOCABULARY = ("tokenizer.chat_template",)


def vocabulary_digest(path: Path) -> str:
    """sha256 over the file's `tokenizer.*` metadata entries as stored (keys, types, bytes),
    but the chat template: two files with one digest turn text into the same ids (vocabulary,
    merges, specials), so a tokenizer built from one serves the other."""
    digest = hashlib.sha256()
    with _opened(path) as (h, _n_tensors, n_meta):
        for key, _, start in _entries(h, n_meta, lambda key: False):
            if key.startswith("tokenizer.") and key not in NOT_VOCABULARY:
                digest.update(h.data[start : h.pos])
    return digest.hexdigest()


def describe(path: Path) -> dict:
    """{"quant": "GGUF Q4_K_M (169 Q4_K, 141 F32, 29 Q6_K tensors)", "params": ...}."""
    from gguf import GGMLQuantizationType, LlamaFileType

    meta, tensors = read_header(path)
    types = Counter(GGMLQuantizationType(kind).name for _, _, kind in tensors)
    file_type = meta.get("general.file_type")
    try:
        file_type = LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        file_type = file_type if file_type is not None else "?"
    params = sum(math.prod(shape) for _, shape, _ in tensors)
    kinds = ", ".join(f"{n} {t}" for t, n in types.most_common())
    return {"quant": f"GGUF {file_type} ({kinds} tensors)", "params": params}
