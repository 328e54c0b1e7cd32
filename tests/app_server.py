"""`python app.py` launched for real in a subprocess, for the gradio_client and browser tests,
and the headless chromium the browser tests drive.

    spec = save_tiny_pair(tmp_path)                      # "DRAFT_DIR -> TARGET_DIR" on disk
    with launched_app({"SPECVIZ_DEFAULT_PAIR": spec}) as url: ...

The tiny pair is tests/tiny_models.py's target and its "close" draft, saved as safetensors
folders with the tokenizer: the app loads it through the same custom-pair path a user's
local folders take. The bundled tests launch the app with its defaults instead.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tiny_models import CLOSE_NOISE, tiny_model, tiny_tokenizer

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
START_TIMEOUT_S = 180  # a generous bound for a busy CI machine, not a speed requirement
CHROMIUM = "/usr/bin/chromium"  # Debian's chromium, the browser .ci/run installs


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (Playwright or chromium absent), or None."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (python3.11 -m pip install -r requirements-dev.txt)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    return None


@contextmanager
def chromium():
    """Headless chromium driven by Playwright, closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-background-networking"]
        )
        try:
            yield browser
        finally:
            browser.close()


def save_tiny_pair(folder: Path) -> str:
    """Save the tiny target and its close draft as model folders; return the pair's spec."""
    tok = tiny_tokenizer()
    models = {"tiny-target": tiny_model(0), "tiny-draft": tiny_model(1000, noise_from=0, noise=CLOSE_NOISE)}
    for name, model in models.items():
        model.save_pretrained(folder / name)
        tok.save_pretrained(folder / name)
    return f"{folder / 'tiny-draft'} -> {folder / 'tiny-target'}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def launched_app(env: dict[str, str], log_name: str = "app"):
    """Run app.py on a free port with `env` added; yield its URL once the page answers."""
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"{log_name}.log"
    # fp32 unless a test asks otherwise: tests compare tokens, which a multi-token pass gives
    # exactly as one-token passes do only in fp32 (and the choice of precision is timed).
    full_env = {
        "SPECVIZ_DTYPE": "float32",
        **os.environ,
        "GRADIO_ANALYTICS_ENABLED": "False",
        "GRADIO_SERVER_PORT": str(port),
        **env,
    }
    full_env.pop("PORT", None)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "app.py"],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _answers(url):
                if proc.poll() is not None:
                    raise RuntimeError(f"app.py exited with {proc.returncode}: see {log_path}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"app.py did not answer on {url}: see {log_path}")
                time.sleep(0.5)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
