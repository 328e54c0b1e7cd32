"""Tests marked `browser` need Playwright and chromium. Where either is missing they are
skipped on a developer's machine, but fail in CI (the environment variable CI set, as
.ci/run is run), so that a CI without a browser cannot pass without running them."""

from __future__ import annotations

import os

import pytest


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
