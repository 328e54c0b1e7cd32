"""Assembling a bundled GGUF from part packages, and the cache files that prove themselves.

The part packages here are small fake distributions written into a temporary folder on
sys.path (a dist-info with a RECORD and a data file each), found the same way as the real
ones: through package metadata, without importing them.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import pytest

from specviz.models.files import cache
from specviz.models.files.bundled import assemble, find_parts, parts_installed
from specviz.models.files.convert import ensure_gguf, gguf_path
from specviz.models.errors import ChecksumError, MissingPartsError
from specviz.models.catalogue.presets import BundledGGUF

PART_BYTES = [b"GGUF" + bytes(range(256)) * 40, os.urandom(3000), b"tail" * 700]


def _fake_gguf(parts: list[bytes], *, prefix: str = "fake-model-part", sha256: str | None = None) -> BundledGGUF:
    whole = b"".join(parts)
    return BundledGGUF(
        name=f"{prefix}.gguf",
        package_prefix=prefix,
        version="0.1.0",
        parts=len(parts),
        size=len(whole),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
        quant="test",
    )


def _install_fake_parts(site, prefix: str, parts: list[bytes], skip: int | None = None) -> None:
    """Write distributions `{prefix}1..N`, each with `data/partNN.bin`, as pip would."""
    for i, data in enumerate(parts, start=1):
        if i == skip:
            continue
        dist = f"{prefix}{i}"
        pkg = dist.replace("-", "_")
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "__init__.py").write_text("raise RuntimeError('part packages must never be imported')\n")
        (site / pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"{pkg}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
        (info / "RECORD").write_text(
            f"{pkg}/__init__.py,,\n{pkg}/data/part{i:02d}.bin,,{len(data)}\n{info.name}/METADATA,,\n"
        )


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    return folder


def test_parts_are_found_in_order_without_importing_them(site):
    gguf = _fake_gguf(PART_BYTES)
    _install_fake_parts(site, gguf.package_prefix, PART_BYTES)
    paths = find_parts(gguf)
    assert [p.read_bytes() for p in paths] == PART_BYTES
    assert not any(m.startswith("fake_model_part") for m in sys.modules)


def test_missing_parts_are_named(site):
    gguf = _fake_gguf(PART_BYTES)
    _install_fake_parts(site, gguf.package_prefix, PART_BYTES, skip=2)
    assert not parts_installed(gguf)
    with pytest.raises(MissingPartsError, match=r"1 of 3 part packages are missing \(fake-model-part2==0\.1\.0\)"):
        find_parts(gguf)


def test_assembly_with_the_right_hash_gives_the_concatenation(site, tmp_path):
    gguf = _fake_gguf(PART_BYTES)
    _install_fake_parts(site, gguf.package_prefix, PART_BYTES)
    seen = []
    dest = assemble(
        gguf, find_parts(gguf), tmp_path / "out" / gguf.name, label="fake", progress=lambda f, m: seen.append(f)
    )
    assert dest.read_bytes() == b"".join(PART_BYTES)
    assert os.listdir(dest.parent) == [gguf.name]  # no temporary file left behind
    assert seen and seen[-1] == 1.0


def test_assembly_with_a_wrong_hash_deletes_the_file_and_names_both_hashes(site, tmp_path):
    wrong = "0" * 64
    gguf = _fake_gguf(PART_BYTES, sha256=wrong)
    _install_fake_parts(site, gguf.package_prefix, PART_BYTES)
    actual = hashlib.sha256(b"".join(PART_BYTES)).hexdigest()
    out = tmp_path / "out"
    with pytest.raises(ChecksumError) as err:
        assemble(gguf, find_parts(gguf), out / gguf.name, label="my-preset")
    message = str(err.value)
    assert "my-preset" in message and wrong in message and actual in message
    assert os.listdir(out) == []


def test_an_interrupted_assembly_leaves_nothing_that_looks_complete(site, tmp_path):
    gguf = _fake_gguf(PART_BYTES)
    _install_fake_parts(site, gguf.package_prefix, PART_BYTES)
    out = tmp_path / "out"

    def interrupt(fraction, message):
        if fraction > 0.4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        assemble(gguf, find_parts(gguf), out / gguf.name, label="fake", progress=interrupt)
    assert os.listdir(out) == []


def test_the_cache_rebuilds_a_truncated_or_altered_gguf(site):
    gguf = _fake_gguf(PART_BYTES)
    _install_fake_parts(site, gguf.package_prefix, PART_BYTES)
    path = ensure_gguf(gguf, "fake")
    assert path == gguf_path(gguf) and path.read_bytes() == b"".join(PART_BYTES)
    assert cache.file_is_valid(path, gguf.sha256)

    path.write_bytes(path.read_bytes()[:100])  # truncated, as by a full disk
    assert not cache.file_is_valid(path, gguf.sha256)
    assert ensure_gguf(gguf, "fake").read_bytes() == b"".join(PART_BYTES)

    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, one byte changed: the new mtime forces a re-hash
    time.sleep(0.01)
    path.write_bytes(bytes(data))
    assert not cache.file_is_valid(path, gguf.sha256)
    assert ensure_gguf(gguf, "fake").read_bytes() == b"".join(PART_BYTES)


def test_a_cached_folder_with_a_corrupt_file_is_invalid(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    folder = tmp_path / "models" / "entry"

    def build(tmp):
        (tmp / "a.bin").write_bytes(b"a" * 1000)
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.json").write_text("{}")
        return {"source": "test"}

    cache.build_folder(folder, build)
    assert cache.folder_is_valid(folder)
    assert cache.folder_manifest(folder)["source"] == "test"
    assert sorted(cache.folder_manifest(folder)["files"]) == ["a.bin", "sub/b.json"]
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left

    time.sleep(0.01)
    (folder / "a.bin").write_bytes(b"b" * 1000)
    assert not cache.folder_is_valid(folder)
    (folder / "a.bin").write_bytes(b"a" * 999)
    assert not cache.folder_is_valid(folder)


def test_an_interrupted_folder_build_leaves_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    folder = tmp_path / "models" / "entry"

    def build(tmp):
        (tmp / "half.bin").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.build_folder(folder, build)
    assert list((tmp_path / "models").iterdir()) == []
    assert not cache.folder_is_valid(folder)
