"""llama.cpp's own n-gram speculation (llama-speculative-simple, built from the source vendored
in the pinned llama-cpp-python sdist) run by the bench beside specviz's plain decoding of the
bundled pair's GGUF target: greedy, the same tokens."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.workshop.bench import llamacpp_tools

pytestmark = pytest.mark.bundled

ROOT = Path(__file__).resolve().parents[1]
TOKENS = 96


@pytest.fixture(scope="module")
def built():
    if not (llamacpp_tools.tools_dir() / "llama-speculative-simple").is_file():
        subprocess.run(["bash", str(ROOT / "scripts" / "build_llamacpp_tools.sh")], check=True, timeout=1800)


def test_llamacpp_ngram_speculation_gives_specviz_plain_decodings_tokens(built, tmp_path):
    command = [sys.executable, "-m", "specviz", "bench", "--runtime", "llama.cpp", "--threads", "2"]
    command += ["--max-new-tokens", str(TOKENS), "--repeats", "1", "--no-warmup", "--prompt-ids", "edit-rename"]
    command += ["--methods", "sv-plain,ll-ngram-simple", "--out", str(tmp_path)]
    subprocess.run(command, check=True, timeout=900, cwd=ROOT, capture_output=True)
    data = json.loads((tmp_path / "bench.json").read_text())
    (plain,), (tool,) = (data["samples"]["edit-rename"][m] for m in ("sv-plain", "ll-ngram-simple"))
    assert len(plain["token_ids"]) == TOKENS and tool["token_ids"] == plain["token_ids"]
    assert tool["new_tokens"] >= TOKENS and tool["drafted"] > 0
