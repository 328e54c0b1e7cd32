"""Tests marked `browser` need Playwright and chromium. Where either is missing they are
skipped on a developer's machine, but fail in CI (the environment variable CI set, as
.ci/run is run), so that a CI without a browser cannot pass without running them.

The tests run on a cache folder of their own (`SPECVIZ_CACHE`, unless already set): what
they measure for their tiny pairs (pass costs, precision choices) stays out of the user's
cache, while the user's models and earlier measurements are still found there: the model
folders are linked, the measurements copied."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Files of the full suite left out of the fast tier (README.md, "Tests"), each 10 s or more here:
# command-line runs in subprocesses, Monte Carlo over trees and copy spans, model loads.
SLOW = {
    "test_robustness.py",
    "test_copy_span.py",
    "test_models_loader.py",
    "test_verify_tree.py",
    "test_resident.py",
    "test_browser_gate.py",
    "test_head.py",
}
SHARED = (
    "models",
    "gguf",
    "wheels",
    "locks",
    "tokenizers",
    "llama.cpp-tools",
)  # linked: built once, reused by every run
MEASURED = ("cost-models", "precision", "runtime-choice")  # copied: tests add their own entries


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("SPECVIZ_CACHE") or hasattr(config, "workerinput"):
        return
    from specviz.models.files.cache import cache_root

    real = cache_root()
    mine = Path(tempfile.mkdtemp(prefix="specviz-test-cache-"))
    for name in SHARED:
        (real / name).mkdir(parents=True, exist_ok=True)
        (mine / name).symlink_to(real / name, target_is_directory=True)
    for name in MEASURED:
        if (real / name).is_dir():
            shutil.copytree(real / name, mine / name)
    os.environ["SPECVIZ_CACHE"] = str(mine)
    config.add_cleanup(lambda: shutil.rmtree(mine, ignore_errors=True))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def no_check_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny model's pass takes a fraction of a millisecond, so the load check of its cached
    costs is often off by more than its tolerance and pauses (costs.measure.CHECK_PAUSE_S)
    before timing again, for a busy moment a real machine would have: here it only waits."""
    from specviz.costs import measure

    monkeypatch.setattr(measure, "CHECK_PAUSE_S", 0.0)


def in_ci(env=os.environ) -> bool:
    return env.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("browser") is None:
        return
    from app_server import browser_missing

    missing = browser_missing()
    if missing is None:
        return
    if in_ci():
        pytest.fail(f"browser test cannot run in CI: {missing}", pytrace=False)
    pytest.skip(f"{missing} (in CI, with CI set, this fails instead)")
