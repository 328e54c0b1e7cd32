"""llama.cpp's own speculative decoding as a bench reference: `llama-speculative-simple`
with the draft model (`--spec-type draft-simple`) or with one of its n-gram drafters, which
need no draft model (`--spec-type ngram-simple`, `ngram-map-k`, `ngram-map-k4v`, `ngram-mod`,
`ngram-cache`: the types `common/speculative.cpp` of this version knows), built from the
source vendored in the pinned llama-cpp-python sdist by scripts/build_llamacpp_tools.sh into
the cache.

It runs as a process per prompt over the same GGUF files and threads, greedy, and reports
its own encode and decode times: the bench's rate for it is new tokens over both (specviz's
own runs count the prefill too). It prints text, not ids, so its token ids are its text
re-encoded by the pair's tokenizer (the "same tokens" column is approximate for it).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from specviz.lm.llamacpp_runtime.library import cpu_has_amx
from specviz.lm.llamacpp_runtime.model import DEFAULT_CONTEXT

TIMEOUT_S = 600


def tools_dir() -> Path:
    import importlib.metadata

    from specviz.models.files.cache import cache_root

    return cache_root() / "llama.cpp-tools" / importlib.metadata.version("llama-cpp-python") / "bin"


def missing() -> str | None:
    """Why the ll-* methods cannot run here, or None."""
    exe = tools_dir() / "llama-speculative-simple"
    if not exe.is_file():
        return f"llama.cpp's own tools are not built ({exe} missing): run scripts/build_llamacpp_tools.sh once (about 5-10 minutes)"
    return None


# llama.cpp's n-gram drafters and the flags they run with: the examples of the vendored
# docs/speculative.md (drafts up to 64 tokens; k4v with its 8-token keys and values), defaults
# otherwise (ngram-simple and ngram-map-k look up a 12-token key and draft up to 48 tokens,
# ngram-mod a 24-token hash and 48 to 64, ngram-cache its own statistics of the context).
NGRAM_TYPES = {
    "ngram-simple": ["--spec-draft-n-max", "64"],
    "ngram-map-k": ["--spec-draft-n-max", "64"],
    "ngram-map-k4v": [
        "--spec-ngram-map-k4v-size-n",
        "8",
        "--spec-ngram-map-k4v-size-m",
        "8",
        "--spec-ngram-map-k4v-min-hits",
        "2",
        "--spec-draft-n-max",
        "64",
    ],
    "ngram-mod": [],
    "ngram-cache": [],
}


def speculative_simple(
    target: Path,
    draft: Path | None,
    prompt_text: str,
    *,
    max_new_tokens: int,
    threads: int,
    draft_max: int = 0,
    spec_type: str = "draft-simple",
) -> dict:
    """One run: {"text", "new_tokens", "wall_s", "drafted", "accepted"} from its own report.
    `spec_type` draft-simple drafts with `draft` up to `draft_max` tokens; an n-gram type
    (NGRAM_TYPES) drafts from the context alone."""
    args = _speculative_args(target, draft, prompt_text, max_new_tokens, threads, draft_max, spec_type)
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        tail = " / ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise RuntimeError(f"llama-speculative-simple exited with {done.returncode}: {tail}")
    return _speculative_report(done.stdout, done.stderr, prompt_text)


def _speculative_args(
    target: Path,
    draft: Path | None,
    prompt_text: str,
    max_new_tokens: int,
    threads: int,
    draft_max: int,
    spec_type: str,
) -> list[str]:
    """llama-speculative-simple's command line: greedy, on the CPU, the prompt as given (a
    code prompt's "\\n" is not a newline)."""
    args = [str(tools_dir() / "llama-speculative-simple"), "-m", str(target), "-p", prompt_text]
    args += ["-n", str(max_new_tokens), "--spec-type", spec_type, "--temp", "0", "--no-escape"]
    if spec_type in NGRAM_TYPES:
        return args + NGRAM_TYPES[spec_type] + _on_cpu(threads, draft=False)
    return args + ["-md", str(draft), "--spec-draft-n-max", str(draft_max)] + _on_cpu(threads, draft=True)


def _on_cpu(threads: int, *, draft: bool) -> list[str]:
    """What every tool runs with here: the machine's threads, the runtime's default context, no
    layer on a GPU (the draft's neither, where there is one), and on AMX CPUs no repacking, as
    the runtime loads (lm/llamacpp_runtime/model.py)."""
    args = ["-t", str(threads), "-c", str(DEFAULT_CONTEXT), "-ngl", "0"] + (
        ["-td", str(threads), "-ngld", "0"] if draft else []
    )
    return args + (["--no-repack"] if cpu_has_amx() else [])


def _speculative_report(stdout: str, stderr: str, prompt_text: str) -> dict:
    """The text, counts and timing that llama-speculative-simple printed."""
    log = stdout + stderr

    def number(pattern: str) -> float:
        m = re.search(pattern, log)
        if m is None:
            raise RuntimeError(f"llama-speculative-simple did not report {pattern!r}")
        return float(m.group(1))

    enc_s = number(r"encoded\s+\d+ tokens in\s+([\d.]+) seconds")
    dec_s = number(r"decoded\s+\d+ tokens in\s+([\d.]+) seconds")
    start = stdout.find(prompt_text)
    text = stdout[start + len(prompt_text) :] if start >= 0 else stdout
    return {
        "text": text.strip("\n"),
        "new_tokens": int(number(r"n_predict\s*=\s*(\d+)")),
        "wall_s": enc_s + dec_s,
        "drafted": int(number(r"n_drafted\s*=\s*(\d+)")),
        "accepted": int(number(r"n_accept\s*=\s*(\d+)")),
    }


def server_args(exported: str, port: int, threads: int) -> list[str]:
    """An exported llama-server command (`production.export`) as arguments for the built
    binary, on `port`, with its /metrics on and this machine's threads."""
    import shlex

    args = shlex.split(exported.replace("\\\n", " "))
    if not args or args[0] != "llama-server":
        raise ValueError(f"not a llama-server command: {exported[:60]!r}")
    if "--port" in args:
        i = args.index("--port")
        del args[i : i + 2]
    args = [str(tools_dir() / "llama-server"), *args[1:], "--port", str(port), "--host", "127.0.0.1"]
    return args + ["--metrics", "--no-webui"] + _on_cpu(threads, draft=True)


class Server:
    """A llama-server process started from `args` (`server_args`), stopped on exit."""

    def __init__(self, args: list[str], port: int, log: Path):
        self.args, self.port, self.log = args, port, log
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> "Server":
        import time
        import urllib.request

        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}: see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"llama-server was not ready in 180 s: see {self.log}")

    def post(self, path: str, body: dict) -> dict:
        import json
        import urllib.request

        req = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return json.loads(r.read())

    def get(self, path: str) -> str:
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=60) as r:
            return r.read().decode()

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
