"""llama-cpp-python as requirements.txt builds it: portable, and safe on every model it loads.

The build carries one CPU backend per instruction set; `library.llama()` loads the best one
this CPU runs, never an AMX one, and models load with the weight repacking on. The AMX buffer
type crashed on passes over more than one token, so every model the runtime loads here makes
such a pass, in a child process (a crash fails the test with its signal instead of ending the
test run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from specviz.lm.llamacpp_runtime import library  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_the_best_variant_this_cpu_runs_is_chosen_and_never_an_amx_one():
    scores = {"x64": 1, "haswell": 40, "zen4": 90, "sapphirerapids": 120, "icelake": 0}
    assert library.choose_variant(scores) == "zen4"  # sapphirerapids (AMX) left out, icelake cannot run
    assert library.choose_variant({"x64": 1, "haswell": 40}) == "haswell"
    assert library.choose_variant({"sapphirerapids": 120}) is None
    assert library.choose_variant({}) is None


def test_the_installed_build_is_the_portable_one_and_loads_a_backend_this_cpu_runs():
    import llama_cpp

    variants = library.cpu_variants(Path(llama_cpp.__file__).parent / "lib")
    assert "haswell" in variants and "x64" in variants, (
        "llama-cpp-python was not built as requirements.txt asks (a CPU backend per instruction set): "
        "a wheel cached from another build? pip install --no-cache-dir --force-reinstall -r requirements.txt"
    )
    library.llama()
    assert library.CPU_VARIANT in variants and library.CPU_VARIANT not in ("sapphirerapids",)
    assert library.build_kind() == f"portable (CPU backend {library.CPU_VARIANT})"
    assert library.extra_buffer_types()
    flags = Path("/proc/cpuinfo").read_text()
    if " avx2" in flags:  # a CPU with AVX2 gets at least the AVX2 backend, not the baseline
        assert library.CPU_VARIANT not in ("x64", "sse42", "sandybridge", "ivybridge", "piledriver")


SEVERAL_TOKENS = r"""
import json, sys, torch
from specviz.lm import load_pair
out = {}
for spec in sys.argv[1:]:
    pair = load_pair(spec, runtime="llama.cpp")
    for role in ("target", "draft"):
        model = getattr(pair, role)
        if model is None:
            continue
        ids = torch.tensor(pair.tokenizer("def add(a, b):\n    return a + b\n")["input_ids"][:16])
        if pair.draft_tokenizer is not None and role == "draft":
            ids = torch.tensor(pair.draft_tokenizer("def add(a, b):\n    return a + b\n")["input_ids"][:16])
        lm = model.open_lm()
        rows = lm.feed(ids, keep=0)  # one pass over all of them
        out[f"{spec}:{role}"] = {"rows": int(rows.shape[0]), "finite": bool(torch.isfinite(rows).all())}
print(json.dumps(out))
"""


@pytest.mark.bundled
def test_every_bundled_model_survives_a_pass_over_several_tokens():
    from specviz.models.catalogue.presets import get_preset
    from specviz.models.catalogue.status import preset_status

    def ready(name: str) -> bool:
        status = preset_status(get_preset(name))
        return all(status[role].get("cache", "empty") != "empty" for role in ("draft", "target"))

    specs = [s for s in ("qwen-coder", "smol-qwen") if ready(s)]
    if not specs:
        pytest.skip("no bundled pair prepared (python -m specviz models --prepare qwen-coder)")
    done = subprocess.run(
        [sys.executable, "-c", SEVERAL_TOKENS, *specs], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (
        f"exit {done.returncode} (a negative one is the signal that ended it): {done.stderr[-2000:]}"
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen and all(v["rows"] > 1 and v["finite"] for v in seen.values()), seen
