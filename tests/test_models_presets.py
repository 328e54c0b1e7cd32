"""Presets, custom-pair specs, and the offline message for pairs that need the Hub."""

from __future__ import annotations

import json

import pytest

from specviz.workshop.cli import main
from specviz.models import DEFAULT_PAIR, list_presets
from specviz.lm import load_pair, prepare
from specviz.models.errors import (
    CustomModelsDisabledError,
    HubUnavailableError,
    MissingModelError,
    UnknownPresetError,
    UnsafeWeightsError,
)
from specviz.models.catalogue.presets import PRESETS, get_preset
from specviz.models.catalogue.sources import resolve


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_default_pair_is_the_bundled_qwen_coder_pair_listed_first():
    presets = list_presets()
    assert DEFAULT_PAIR == "qwen-coder" == presets[0].name
    qwen = get_preset("qwen-coder")
    assert all(m.bundled is not None for m in qwen.models())  # works offline
    assert qwen.draft.hub_id == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert qwen.target.hub_id == "Qwen/Qwen2.5-Coder-1.5B-Instruct"


def _part_files(package: str) -> list:
    """A part package's data file, found from its installed metadata (not through specviz)."""
    import importlib.metadata

    dist = importlib.metadata.distribution(package)
    return [dist.locate_file(f) for f in dist.files if str(f).endswith(".bin")]


@pytest.mark.parametrize("role", ["target", "draft"])
def test_the_installed_parts_make_the_file_the_preset_pins(role):
    # The bytes of the installed part packages, concatenated in order and hashed here, are the
    # size and sha256 the preset promises (a republished or reordered part would fail).
    import hashlib
    import importlib.metadata

    gguf = getattr(get_preset("qwen-coder"), role).bundled
    h, size = hashlib.sha256(), 0
    for i in range(1, gguf.parts + 1):
        package = f"{gguf.package_prefix}{i}"
        assert importlib.metadata.version(package) == gguf.version
        (data,) = _part_files(package)
        with open(data, "rb") as f:
            while chunk := f.read(1 << 24):
                h.update(chunk)
                size += len(chunk)
    assert (size, h.hexdigest()) == (gguf.size, gguf.sha256)


def test_every_preset_has_a_description_sizes_and_a_source():
    names = {p.name for p in list_presets()}
    assert {"qwen-coder", "smollm2", "qwen-7b"} <= names
    for p in list_presets():
        assert p.description
        for m in p.models():
            assert m.params > 0 and (m.bundled or m.hub_id)
    assert not any(m.bundled for m in get_preset("smollm2").models())  # needs the Hub


def test_preset_resolution():
    plan = resolve("qwen-coder")
    assert plan.preset.name == "qwen-coder"
    assert plan.target.kind == plan.draft.kind == "bundled"
    assert plan.target.fallback_hub == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    solo = resolve("qwen-coder", with_draft=False)
    assert solo.draft is None and solo.target == plan.target
    hub = resolve("smollm2")
    assert (hub.draft.kind, hub.draft.location) == ("hub", "HuggingFaceTB/SmolLM2-135M-Instruct")


def test_an_unknown_preset_lists_the_known_ones():
    with pytest.raises(UnknownPresetError, match=r"unknown model pair 'qwen-codr': choose one of ") as refused:
        resolve("qwen-codr")
    assert all(name in str(refused.value) for name in PRESETS)


def test_custom_pairs_by_arrow_or_tuple(tmp_path):
    gguf = tmp_path / "small.gguf"
    gguf.write_bytes(b"GGUF")
    plan = resolve(f"{gguf} -> Qwen/Qwen2.5-7B-Instruct")
    assert (plan.draft.kind, plan.target.kind) == ("gguf", "hub")
    assert plan.name == f"{gguf} -> Qwen/Qwen2.5-7B-Instruct"
    assert (
        resolve(("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-7B-Instruct")).name
        == "Qwen/Qwen2.5-0.5B-Instruct -> Qwen/Qwen2.5-7B-Instruct"
    )
    assert resolve("Qwen/Qwen2.5-7B-Instruct", with_draft=False).draft is None
    assert resolve("-> Qwen/Qwen2.5-7B-Instruct").draft is None


def test_custom_paths_are_checked(tmp_path):
    with pytest.raises(MissingModelError, match="no such file or folder, and not a Hub id"):
        resolve(f"{tmp_path}/nothing-here -> Qwen/Qwen2.5-7B-Instruct")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text("{}")
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(UnsafeWeightsError, match=r"only pickled weights \(pytorch_model.bin\)"):
        resolve(f"{pickled} -> Qwen/Qwen2.5-7B-Instruct")
    with pytest.raises(UnsafeWeightsError, match="must be .gguf"):
        resolve(f"Qwen/Qwen2.5-0.5B-Instruct -> {pickled / 'pytorch_model.bin'}")
    with pytest.raises(MissingModelError, match="not a model folder"):
        resolve(f"Qwen/Qwen2.5-0.5B-Instruct -> {tmp_path}")


def test_custom_models_can_be_disabled_for_public_deployments(monkeypatch):
    monkeypatch.setenv("SPECVIZ_ALLOW_CUSTOM_MODELS", "0")
    with pytest.raises(CustomModelsDisabledError, match="SPECVIZ_ALLOW_CUSTOM_MODELS=0"):
        resolve("Qwen/Qwen2.5-0.5B-Instruct -> Qwen/Qwen2.5-7B-Instruct")
    assert resolve("smollm2").preset.name == "smollm2"  # presets stay available


def test_a_hub_only_preset_offline_says_so(offline):
    with pytest.raises(HubUnavailableError) as err:
        load_pair("smollm2", device="cpu")
    message = str(err.value)
    assert "needs the Hugging Face Hub" in message and "not available offline" in message
    assert "smollm2 (target): HuggingFaceTB/SmolLM2-1.7B-Instruct" in message and "HF_HUB_OFFLINE" in message
    with pytest.raises(HubUnavailableError, match="needs the Hugging Face Hub"):
        prepare("qwen-7b")
    with pytest.raises(HubUnavailableError, match="someone/some-model needs the Hugging Face Hub"):
        load_pair("someone/some-model", with_draft=False, device="cpu")


def test_cli_prepare_of_a_hub_preset_offline_is_one_line_not_a_traceback(offline, capsys):
    assert main(["models", "--prepare", "smollm2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "specviz models: error: smollm2 (target): HuggingFaceTB/SmolLM2-1.7B-Instruct needs the Hugging Face Hub"
    )
    assert "Traceback" not in err


def test_cli_lists_presets_with_availability_sizes_and_cache_state(offline, capsys):
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["qwen-coder"]["default"] and rows["qwen-coder"]["available"] == "offline"
    assert rows["qwen-coder"]["target"]["file_bytes"] == 1_117_320_768
    assert rows["qwen-coder"]["target"]["cache"] in ("empty", "assembled", "converted")
    assert rows["smollm2"]["available"] == "needs the Hub"
    assert rows["qwen-7b"]["target"]["float32_gb"] > 30

    assert main(["models"]) == 0
    text = capsys.readouterr().out
    assert "qwen-coder (default): offline" in text and "smollm2: needs the Hub" in text
