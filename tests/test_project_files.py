"""The deploy files say what the Hub and a Spacefile host need, and the pins stay exact."""

from pathlib import Path

import yaml

# What ZeroGPU runs (huggingface/hub-docs, Spaces ZeroGPU page): these Pythons and these torches.
ZERO_GPU_PYTHONS = {"3.10", "3.12"}
ZERO_GPU_TORCHES = {"2.8.0", "2.9.1", "2.10.0", "2.11.0"}

ROOT = Path(__file__).resolve().parent.parent


def front_matter() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "README.md must start with Spaces front matter"
    return yaml.safe_load(text.split("---\n")[1])


def requirements(name: str = "requirements.txt") -> dict[str, str]:
    """name -> what follows it ("==1.2" or a range), build settings left out."""
    import re

    out = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#")[0].split(" --")[0].strip()
        if line:
            m = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?(.*)", line)
            out[m.group(1).lower()] = m.group(3).strip()  # gradio[mcp] is gradio
    return out


def pins() -> dict[str, str]:
    return {n: spec.removeprefix("==") for n, spec in requirements().items() if spec.startswith("==")}


def test_readme_front_matter_has_what_spaces_needs():
    fm = front_matter()
    for key in (
        "title",
        "emoji",
        "colorFrom",
        "colorTo",
        "sdk",
        "sdk_version",
        "python_version",
        "app_file",
        "license",
        "short_description",
    ):
        assert fm.get(key), f"front matter lacks {key}"
    assert fm["sdk"] == "gradio"
    assert fm["app_file"] == "app.py" and (ROOT / "app.py").exists()
    assert str(fm["python_version"]) in ZERO_GPU_PYTHONS  # ZeroGPU runs no other
    assert fm["sdk_version"] == pins()["gradio"], "sdk_version must be the pinned gradio"
    assert len(fm["short_description"]) <= 60  # the Hub rejects longer ones


def test_requirements_are_exact_pins_with_the_bundled_parts():
    import importlib.metadata

    from specviz.models.catalogue.presets import BundledGGUF, list_presets

    from packaging.specifiers import SpecifierSet

    p = pins()
    loose = {n: spec for n, spec in requirements().items() if n not in p}
    assert set(loose) == {"torch"}, f"every requirement but torch is pinned with ==: {loose}"
    # torch is a range that the CPU build here and the version a Space installs first both satisfy,
    # and that version is one ZeroGPU runs.
    space_torch = requirements("pre-requirements.txt")["torch"].removeprefix("==")
    assert space_torch in ZERO_GPU_TORCHES
    assert space_torch in SpecifierSet(loose["torch"])
    assert importlib.metadata.version("torch").split("+")[0] in SpecifierSet(loose["torch"])
    # Every part package a preset ships its files in is pinned at the preset's version, and
    # nothing else of the kind is.
    parts = {
        pkg: m.bundled.version
        for preset in list_presets()
        for m in preset.models()
        if isinstance(m.bundled, BundledGGUF)
        for pkg in m.bundled.packages()
    }
    assert {
        n: v
        for n, v in p.items()
        if n.rsplit("part", 1)[0] + "part" in {k.rsplit("part", 1)[0] + "part" for k in parts}
    } == parts
    # and installed at that version here
    assert all(importlib.metadata.version(n) == v for n, v in parts.items())


def test_spacefile_is_a_valid_v0_manifest():
    d = yaml.safe_load((ROOT / "Spacefile").read_text())
    assert d["v"] == 0
    (micro,) = d["micros"]
    assert micro["engine"] == "custom" and micro["primary"] is True
    assert micro["commands"] and micro["run"] and micro["public_routes"]
    assert "app.py" in micro["run"]
