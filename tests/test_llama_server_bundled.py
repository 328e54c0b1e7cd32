"""The exported llama-server command, run for real: llama-server built once from the source
vendored in the pinned llama-cpp-python sdist (scripts/build_llamacpp_tools.sh, into the
cache), serving the bundled pair with the draft length the export wrote, answering one
request; its `timings` and its `/metrics` read back through `production.metrics`."""

import json
import subprocess
from pathlib import Path

import pytest

from app_server import free_port
from specviz.workshop.bench import llamacpp_tools
from specviz.lm.llamacpp_runtime.library import default_threads
from specviz.workshop.production import found, metrics
from specviz.workshop.production.export import export
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.bundled

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a Python function that returns the n-th Fibonacci number."


@pytest.fixture(scope="module")
def built():
    if not (llamacpp_tools.tools_dir() / "llama-server").is_file():
        subprocess.run(["bash", str(ROOT / "scripts" / "build_llamacpp_tools.sh")], check=True, timeout=1800)
    return llamacpp_tools.tools_dir()


def test_the_exported_llama_server_command_serves_the_pair_and_its_counts_read_back(built, tmp_path):
    what = found.from_settings("qwen-coder", GenerationSettings(drafter="model", k=3, policy="fixed"))
    command = export(what, "llamacpp").text
    assert "--spec-draft-n-max 3" in command
    port = free_port()
    with llamacpp_tools.Server(
        llamacpp_tools.server_args(command, port, default_threads()), port, tmp_path / "server.log"
    ) as server:
        response = server.post(
            "/completion", {"prompt": PROMPT, "n_predict": 48, "temperature": 0, "seed": 0, "cache_prompt": False}
        )
        scrape = server.get("/metrics")
    t = response["timings"]
    assert t["draft_n"] > 0 and 0 <= t["draft_n_accepted"] <= t["draft_n"], (
        t
    )  # it drafted with the exported draft model
    (c,) = metrics.read(json.dumps(response))
    assert (c.engine, c.draft_tokens, c.accepted) == ("llama.cpp", t["draft_n"], t["draft_n_accepted"])
    assert (
        c.passes == t["predicted_n"] - t["draft_n_accepted"] and c.mean_length_with_bonus == t["predicted_n"] / c.passes
    )
    served = metrics.read(scrape)
    assert [s.engine for s in served] == ["llama.cpp"]
    # One request served: the server's counters hold what its response said.
    assert (served[0].draft_tokens, served[0].accepted) == (t["draft_n"], t["draft_n_accepted"])
