"""Deploying on a Hugging Face Space: the ZeroGPU wiring with the real `spaces` package, and
the cache's default folder on a Space with persistent storage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specviz.app import zero_gpu
from specviz.app.config import PageConfig
from specviz.app.loading import LoadState
from specviz.app.page import status_html
from specviz.models.files import cache

ROOT = Path(__file__).resolve().parent.parent

# Imports the app as `python app.py` does and builds its page, with the real spaces.GPU
# replaced by a recorder that passes every call on to it; prints what was passed.
RECORD_GPU = r"""
import json
import spaces

real = spaces.GPU
calls = []

def recording(task=None, **kwargs):
    made = real(task, **kwargs)
    if callable(task):
        calls.append((task, kwargs))
        return made

    def decorate(fn):
        calls.append((fn, kwargs))
        return made(fn)

    return decorate

spaces.GPU = recording
import app  # noqa: F401
from specviz.app import runner
from specviz.app.config import PageConfig
from specviz.app.page import build_page  # as app.main imports it, after starting the load

build_page(PageConfig(preload=False))
print(json.dumps({
    # spaces calls a `duration` that is not a number with the function's own arguments
    "calls": [{"fn": f"{f.__module__}.{f.__qualname__}", "duration": kw["duration"] if isinstance(kw["duration"], int)
               else kw["duration"](*args)}
              for (f, kw), args in zip(calls, [("p", "x", {}, "s", 20.0, None), ("p", True, "x", {}, 0.0, "s", 31.5), ("p", "s", None)])],
    "spaces_file": spaces.__file__,
}))
"""


def test_the_functions_that_run_the_models_and_only_they_are_passed_to_spaces_gpu():
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "SPACES_ZERO_GPU": ""}
    out = subprocess.run(
        [sys.executable, "-c", RECORD_GPU], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "site-packages" in seen["spaces_file"]  # the installed package, not a stand-in
    # A generation, a sweep point and the batch timing: each touches the models on the GPU. The
    # first two ask for the grant their run limit needs (spaces calls `duration` with the
    # function's own arguments), the batch timing for what its sizes need at the prior rates:
    # 4 sweeps of 6 target and 1 draft passes at each of 4 batch sizes (1.448 s a sweep of the
    # target's, a pass priced at 60 ms or 0.5 ms a token, whichever is more, only 8 x 17 tokens
    # past 60 ms; 0.24 s of the draft's), 4,800 context tokens at 0.5 ms, times 1.5, with 8 s of
    # setup and 3 of the machine figures: 24.73 s.
    margin = zero_gpu.GRANT_MARGIN_S
    assert seen["calls"] == [
        {"fn": "specviz.app.runner._generate", "duration": 20 + margin},
        {"fn": "specviz.workshop.labs.panels._sweep_point", "duration": 32 + margin},
        {"fn": "specviz.workshop.labs.panels._batch_costs", "duration": 25},
    ]


def test_the_cache_defaults_to_persistent_storage_when_it_is_there(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECVIZ_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setattr(cache, "PERSISTENT", data)
    folder, why = cache.where()
    assert folder == data / "specviz" == cache.cache_root()
    assert "persistent" in why and "restarts" in why
    # The page's load status names the folder.
    assert str(data / "specviz") in status_html("p", LoadState("p", True, fraction=0.5, message="loading"))


def test_without_persistent_storage_the_cache_stays_in_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECVIZ_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cache, "PERSISTENT", tmp_path / "no-data")
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "specviz"
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(cache, "PERSISTENT", tmp_path / "a-file")  # not a folder
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "specviz"


def test_specviz_cache_wins_over_persistent_storage(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setattr(cache, "PERSISTENT", data)
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "mine"))
    assert cache.where() == (tmp_path / "mine", "SPECVIZ_CACHE")


def test_a_run_on_zero_gpu_asks_for_what_its_tokens_need_and_ends_before_its_grant_does():
    from specviz.app import runner
    from specviz.settings import GenerationSettings

    short, long = GenerationSettings(max_new_tokens=16), GenerationSettings(max_new_tokens=512)
    config = PageConfig(max_wall_s=300)
    limit = runner.run_wall_s(config, short, "p", on_zero_gpu=True)
    assert limit < runner.run_wall_s(config, long, "p", on_zero_gpu=True) < zero_gpu.MAX_GRANT_S
    assert zero_gpu.grant_for_limit(limit) == zero_gpu.grant_s(16, zero_gpu.RATES.s_per_token("p"))
    assert runner.run_wall_s(config, long, "p", on_zero_gpu=False) == 300  # elsewhere the operator's cap
    assert runner.run_wall_s(PageConfig(max_wall_s=12), long, "p", on_zero_gpu=True) <= 12  # a shorter cap stands
