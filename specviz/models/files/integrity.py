"""Files that prove themselves: read in chunks, hashed, and moved into place only whole.

A file is written under a temporary name beside its destination (`partial_path`), checked,
and renamed into place (`write_checked`, `write_json`), so an interrupted or corrupt write
never leaves a file that looks complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from specviz.models.catalogue.presets import PinnedGGUF
from specviz.models.errors import ChecksumError
from specviz.models.progress import Progress

CHUNK = 8 << 20


def partial_path(dest: Path) -> Path:
    """Where `dest` is written before it is complete: hidden, this process's own."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.partial")


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    with open(path, "rb") as f:
        return copy_hashed([f], None, path.stat().st_size, progress, f"checking {path.name}")[0]


def write_checked(
    dest: Path, write: Callable[[BinaryIO], tuple[str, int]], pinned: PinnedGGUF, what: str, advice: str = ""
) -> Path:
    """Write `dest` through a temporary name (`write(out)` says the sha256 and size of what it
    wrote) and move it into place only if they are `pinned`'s; else delete it and raise
    ChecksumError naming `what` and both hashes, then `advice`."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(dest)
    try:
        with open(tmp, "wb") as out:
            actual, size = write(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if actual != pinned.sha256 or size != pinned.size:
        tmp.unlink(missing_ok=True)
        raise ChecksumError(
            f"{what} does not match: expected sha256 {pinned.sha256} ({pinned.size:,} bytes), "
            f"got {actual} ({size:,} bytes). The bad file was deleted{advice}"
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
    sources: Iterable[BinaryIO], out: BinaryIO | None, total: int, progress: Progress | None, message: str
) -> tuple[str, int]:
    """Read each of `sources` in chunks, hashing, and write them to `out` (where given, then
    flushed to disk): (sha256 hex digest, bytes read)."""
    h, done, total = hashlib.sha256(), 0, max(total, 1)
    for src in sources:
        while chunk := src.read(CHUNK):
            if out is not None:
                out.write(chunk)
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(done / total, message)
    if out is not None:
        out.flush()
        os.fsync(out.fileno())
    return h.hexdigest(), done
