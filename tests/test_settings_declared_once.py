"""A setting is declared once: its field in `GenerationSettings` (settings.py). A toy setting
added there, and nowhere else, reaches validation, the CLI's flags, the API's signature, the
page's controls and the page's handler; and every setting's metadata is whole."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.settings import DEFAULTS, SPECS, SettingsError, from_request

ROOT = Path(__file__).resolve().parent.parent
# The toy field goes after the last field, before the class's first method (a new field goes last).
LAST = "\n\n    def __post_init__(self) -> None:\n"
TOY = '    toy_level: int = setting(3, "a toy setting, added for a test", "Toy level", span=(1, 9))\n'

PROBE = r"""
import argparse, json
import gradio as gr
from specviz.app import live
from specviz.app.config import PageConfig
from specviz.app.page import api_signature, build_page
from specviz.workshop import generate_cli as cli
from specviz.settings import SettingsError, from_request

parser = argparse.ArgumentParser()
cli.add_arguments(parser)
from_cli = cli.settings_from(parser.parse_args(["--prompt", "x", "--toy-level", "7"]))
try:
    from_request({"toy_level": 10})
    refused = None
except SettingsError as e:
    refused = str(e)
demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
tab = None
with gr.Blocks():
    tab = live.LiveTab(PageConfig(default_pair="qwen-coder", preload=False))
control = tab.settings["toy_level"]
values = [5 if c is control else getattr(c, "value", None) for c in tab.inputs]
_, _, read = tab.read(values)
param = api_signature(PageConfig()).parameters["toy_level"]
print(json.dumps({
    "cli": from_cli.toy_level,
    "refused": refused,
    "api": [param.default, param.annotation.__name__],
    "page": [type(control).__name__, control.minimum, control.maximum, control.value, control.label],
    "on_page": any(getattr(b, "elem_id", None) == "toy_level" for b in demo.blocks.values()),
    "read": read.toy_level,
}))
"""


def test_a_toy_setting_added_in_settings_py_alone_reaches_the_cli_the_api_and_the_page(tmp_path):
    shutil.copytree(ROOT / "specviz", tmp_path / "specviz", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "assets").symlink_to(ROOT / "assets")
    settings = tmp_path / "specviz" / "settings.py"
    source = settings.read_text(encoding="utf-8")
    assert source.count(LAST) == 1
    settings.write_text(source.replace(LAST, "\n" + TOY + LAST), encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(Path.home()),
        "PYTHONPATH": str(tmp_path),
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["cli"] == 7
    assert seen["refused"] == "toy level must be a whole number from 1 to 9 (got 10)"
    assert seen["api"] == [3, "int"]
    assert seen["page"] == ["Slider", 1, 9, 3, "Toy level"]
    assert seen["on_page"] and seen["read"] == 5


def test_every_setting_says_what_it_is():
    for name, s in SPECS.items():
        assert s.help and s.label, name
        assert s.kind in ("flag", "whole", "number", "choice", "string"), name
        assert (s.registry is not None) == (s.kind == "choice"), name
        assert (s.limit is not None) == (s.kind == "string"), name
        if s.kind in ("whole", "number"):
            lo, hi = s.span
            assert lo <= getattr(DEFAULTS, name) and (hi is None or getattr(DEFAULTS, name) <= hi), name


@pytest.mark.parametrize("name", [n for n, s in SPECS.items() if s.kind in ("whole", "number")])
def test_each_range_is_enforced_at_both_ends(name):
    s = SPECS[name]
    lo, hi = s.span
    below = lo if s.open_low else lo - (1 if s.kind == "whole" else 0.01)
    with pytest.raises(SettingsError, match=name.replace("_", "[ -]").split("[ -]")[0]):
        from_request({name: below})
    if hi is not None:
        with pytest.raises(SettingsError):
            from_request({name: hi + 1})
    assert getattr(from_request({name: hi if hi is not None else lo}), name) == (hi if hi is not None else lo)
