"""Every pinned package installs on CPython 3.12, manylinux x86-64 (what a ZeroGPU Space runs).

Python 3.12 cannot be installed on the machines that build specviz, so this asks the package
index instead: for each `name==version` in the requirements files, pip must find a wheel for
CPython 3.12 on manylinux x86-64 (or one for any Python), or, for a package that builds from
its sdist (llama-cpp-python), an sdist whose Requires-Python admits 3.12. torch is checked at
the version pre-requirements.txt pins for a Space. Files are downloaded into a temporary
folder and deleted. A pin found once is written to the cache (`py312-found.txt` in
specviz's cache folder) and not asked again: a release's files on the index do not change.
`--again` asks for every pin.

    python3.11 scripts/check_py312.py [--again]  # prints one line a package, exits 1 on a miss
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
FILES = ("pre-requirements.txt", "requirements.txt", "requirements-dev.txt")
TARGET = [
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--abi",
    "cp312",
    "--abi",
    "abi3",
    "--abi",
    "none",
    # The Python images a Space builds on are Debian bookworm (glibc 2.36), where manylinux_2_31
    # wheels run: llguidance ships no older tag after 1.6.
    "--platform",
    "manylinux_2_31_x86_64",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux2014_x86_64",
    "--platform",
    "any",
]
SDIST_ONLY = {"llama-cpp-python"}  # built from source on the Space (see requirements.txt)
PARALLEL = 8
PIN = re.compile(r"^([A-Za-z0-9_.\[\]-]+)==([^\s;]+)")


def pins() -> dict[str, str]:
    """name -> version, the first file that pins a name winning (pre-requirements.txt first)."""
    found: dict[str, str] = {}
    for name in FILES:
        for line in (REPO / name).read_text().splitlines():
            m = PIN.match(line.strip())
            if m:
                found.setdefault(re.sub(r"\[.*\]", "", m.group(1)).lower(), m.group(2))
    return found


def check_wheel(name: str, version: str, folder: Path) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            *TARGET,
            "-d",
            str(folder),
            f"{name}=={version}",
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip found no wheel")
    wheel = next(folder.glob("*.whl")).name
    return wheel.split("-", 2)[-1].removesuffix(".whl")  # the tags: cp312-cp312-manylinux..., py3-none-any


def check_sdist(name: str, version: str, folder: Path) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary=:all:",
            "-d",
            str(folder),
            f"{name}=={version}",
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "pip found no sdist")
    sdist = next(folder.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        info = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        meta = tar.extractfile(info).read().decode()
    requires = re.search(r"^Requires-Python: (.+)$", meta, re.M)
    spec = requires.group(1).strip() if requires else ""
    from packaging.specifiers import SpecifierSet

    if spec and "3.12" not in SpecifierSet(spec):
        raise RuntimeError(f"its sdist says Requires-Python {spec}")
    return f"sdist (Requires-Python {spec or 'any'})"


def check(name: str, version: str) -> str:
    """One line for `name==version`: "ok ..." or "MISS ..."."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            how = (check_sdist if name in SDIST_ONLY else check_wheel)(name, version, Path(tmp))
            return f"ok    {name}=={version}: {how}"
        except Exception as e:  # one line a package, then go on
            return f"MISS  {name}=={version}: {e}"


def found_file() -> Path:
    from specviz.models.files.cache import cache_root

    return cache_root() / "py312-found.txt"


def main(argv: list[str]) -> int:
    pinned = sorted(pins().items())
    record = found_file()
    found = (
        {}
        if "--again" in argv or not record.is_file()
        else dict(line.split("\t", 1) for line in record.read_text().splitlines() if "\t" in line)
    )
    ask = [(n, v) for n, v in pinned if f"{n}=={v}" not in found]
    # Each check is a pip process that mostly waits on the index: several at once.
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        asked = dict(zip(ask, pool.map(lambda nv: check(*nv), ask)))
    lines = [asked.get((n, v)) or f"{found[f'{n}=={v}']} (found before)" for n, v in pinned]
    print("\n".join(lines))
    for (n, v), line in asked.items():
        if line.startswith("ok"):
            found[f"{n}=={v}"] = line
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("".join(f"{key}\t{line}\n" for key, line in sorted(found.items())))
    failed = sum(line.startswith("MISS") for line in lines)
    print(f"{len(pinned) - failed} of {len(pinned)} pinned packages install on CPython 3.12, manylinux x86-64")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
