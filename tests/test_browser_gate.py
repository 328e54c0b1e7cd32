"""Without a browser, the browser tests skip on a developer's machine and fail in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Loaded by the inner pytest: points the browser tests at a chromium that is not there.
HIDE_CHROMIUM = "import app_server\napp_server.CHROMIUM = '/nonexistent/chromium'\n"


def run_browser_test_without_chromium(tmp_path, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "hide_chromium.py").write_text(HIDE_CHROMIUM)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update({"PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS)]), "OMP_NUM_THREADS": "1"})
    if ci is not None:
        env["CI"] = ci
    test = f"{TESTS / 'test_browser.py'}::test_the_page_fits_a_phone_and_reads_in_the_dark_theme"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "hide_chromium", test],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missing_browser_fails_the_browser_tests_in_ci(tmp_path):
    done = run_browser_test_without_chromium(tmp_path, "true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "browser test cannot run in CI: chromium is not installed at /nonexistent/chromium" in done.stdout
    assert "1 error" in done.stdout


def test_a_missing_browser_skips_the_browser_tests_locally(tmp_path):
    done = run_browser_test_without_chromium(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "chromium is not installed" in done.stdout


def test_ci_counts_as_set_unless_empty_or_a_no():
    # The inner pytest above reads CI through this function; its other values are checked here
    # rather than with another inner run.
    from conftest import in_ci

    assert not any(in_ci({"CI": v}) for v in ("", " ", "0", "false", "False", "no"))
    assert not in_ci({})
    assert all(in_ci({"CI": v}) for v in ("true", "1", "yes", "True"))
