"""Files that prove themselves: read in chunks, hashed, and moved into place only whole.

A file is written under a temporary name beside its destination (`partial_path`), checked,
and renamed into place (`install_checked`, `write_json`), so an interrupted or corrupt write
never leaves a file that looks complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from specviz.models.errors import ChecksumError
from specviz.models.progress import Progress

CHUNK = 8 << 20


def partial_path(dest: Path) -> Path:
    """Where `dest` is written before it is complete: hidden, this process's own."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.partial")


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    h = hashlib.sha256()
    total = max(path.stat().st_size, 1)
    done = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(done / total, f"checking {path.name}")
    return h.hexdigest()


def install_checked(
    tmp: Path, dest: Path, actual: str, size: int, sha256: str, expected_size: int, what: str, advice: str = ""
) -> Path:
    """Move a written file into place if its sha256 and size are the pinned ones; else delete
    it and raise ChecksumError naming `what` and both hashes, then `advice`."""
    if actual != sha256 or size != expected_size:
        tmp.unlink(missing_ok=True)
        raise ChecksumError(
            f"{what} does not match: expected sha256 {sha256} ({expected_size:,} bytes), got {actual} ({size:,} bytes). "
            f"The bad file was deleted{advice}"
        )
    os.replace(tmp, dest)
    return dest


def write_json(path: Path, data: dict) -> None:
    """Write `data` to `path` whole or not at all, so a reader never sees half a file;
    makes the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def copy_hashed(
    sources: Iterable[BinaryIO], out: BinaryIO, total: int, progress: Progress | None, message: str
) -> tuple[str, int]:
    """Copy each of `sources` into `out` in chunks, hashing as it writes, and flush it to disk:
    (sha256 hex digest, bytes written)."""
    h, done, total = hashlib.sha256(), 0, max(total, 1)
    for src in sources:
        while chunk := src.read(CHUNK):
            out.write(chunk)
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(done / total, message)
    out.flush()
    os.fsync(out.fileno())
    return h.hexdigest(), done
