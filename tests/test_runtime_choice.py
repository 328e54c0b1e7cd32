"""Which runtime `auto` picks (costs.runtime_choice), from recorded costs, options and the
environment; the expected rates checked by hand arithmetic."""

import pytest

pytest.importorskip("llama_cpp")

from specviz.cost_model import CostModel  # noqa: E402
from specviz.costs import runtime_choice as rc  # noqa: E402
from specviz.errors import UserError  # noqa: E402


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    for var in ("SPECVIZ_RUNTIME", *rc.TORCH_OPTIONS.values()):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)


def test_rates_take_the_best_drafting_k_by_hand_arithmetic():
    # V(n) = 100 + 10 (n - 1), D = 10, alpha 0.8: k = 1 gives 1.8 tokens per 10 + 110 ms = 15.0 tok/s,
    # k = 2 gives 2.44 per 20 + 120 = 17.43, k = 3 gives 2.952 per 30 + 130 = 18.45, k = 4 gives
    # 3.3616 per 40 + 140 = 18.68, k = 5 gives 3.68928 per 50 + 150 = 18.45: k = 4 is best.
    cost = CostModel(verify={n: 100.0 + 10 * (n - 1) for n in range(1, 18)}, draft=10.0)
    r = rc.rates(cost, alpha=0.8)
    assert r["k"] == 4
    assert r["speculative"] == pytest.approx(1000 * 3.3616 / 180)
    assert r["plain"] == pytest.approx(10.0)


def test_an_explicit_runtime_or_the_environment_wins(monkeypatch):
    assert rc.choose("qwen-coder", "torch").runtime == "torch"
    monkeypatch.setenv("SPECVIZ_RUNTIME", "torch")
    c = rc.choose("qwen-coder", "auto")
    assert c.runtime == "torch" and "SPECVIZ_RUNTIME" in c.reason
    monkeypatch.setenv("SPECVIZ_RUNTIME", "tpu")
    with pytest.raises(UserError, match="SPECVIZ_RUNTIME must be one of"):
        rc.choose("qwen-coder", "auto")


def test_a_torch_only_option_makes_auto_torch_and_is_refused_beside_llamacpp():
    c = rc.choose("qwen-coder", "auto", options={"dtype": "bfloat16"})
    assert c.runtime == "torch" and "dtype" in c.reason
    assert rc.choose("qwen-coder", "auto", options={"dtype": "auto", "device": None}).runtime == "llama.cpp"
    with pytest.raises(UserError, match="device applies to the torch runtime only"):
        rc.choose("qwen-coder", "llama.cpp", options={"device": "cuda"})


def test_auto_starts_on_llamacpp_then_follows_the_measured_rates():
    first = rc.choose("qwen-coder")
    assert first.runtime == "llama.cpp" and "not yet timed" in first.reason and first.untimed == ("torch",)
    slow_verify = CostModel(verify={1: 30.0, 2: 60.0, 4: 120.0, 8: 240.0, 17: 510.0}, draft=18.0)  # n passes cost n
    flat_verify = CostModel(verify={1: 40.0, 2: 41.0, 4: 43.0, 8: 47.0, 17: 60.0}, draft=8.0)
    rc.record("qwen-coder", "llama.cpp", slow_verify)
    assert rc.choose("qwen-coder").runtime == "llama.cpp"  # torch not timed yet
    rc.record("qwen-coder", "torch", flat_verify)
    rates = rc.recorded("qwen-coder")
    # llama.cpp: k = 1 is best, 1.8 tokens per 18 + 60 ms = 23.1 tok/s; torch: 3.3616 per 32 + 43.9 ms at k = 4.
    assert rates["llama.cpp"]["k"] == 1 and rates["llama.cpp"]["speculative"] == pytest.approx(1800 / 78)
    assert rates["torch"]["speculative"] > 40
    c = rc.choose("qwen-coder")
    assert c.runtime == "torch" and "measured here" in c.reason and c.untimed == ()
    assert rc.plain_beats_drafting(rates) is None  # torch's drafting (44 tok/s) beats llama.cpp's plain 33.3


def test_the_page_is_told_when_plain_decoding_beats_drafting_everywhere():
    rc.record("qwen-coder", "llama.cpp", CostModel(verify={1: 30.0, 2: 60.0, 4: 120.0, 17: 510.0}, draft=18.0))
    rc.record("qwen-coder", "torch", CostModel(verify={1: 110.0, 2: 112.0, 4: 115.0, 17: 160.0}, draft=30.0))
    rates = rc.recorded("qwen-coder")
    # llama.cpp plain 33.3 tok/s; drafting: llama.cpp 23.1, torch about 14.3.
    note = rc.plain_beats_drafting(rates)
    assert note is not None and "llama.cpp's plain decoding (33.3 tok/s)" in note
    # And where a draft-free drafter does pay: V(13) = 390 ms by interpolation, 13 passes' worth; 13 tokens for it.
    assert "suffix drafter pays on edit work" not in note
    rc.record("qwen-coder", "llama.cpp", CostModel(verify={1: 30.0, 2: 60.0, 4: 70.0, 17: 110.0}, draft=18.0))
    note = rc.plain_beats_drafting(rc.recorded("qwen-coder"))
    # V(13) = 70 + 40 * 9 / 13 = 97.7 ms, 3.3 one-token passes: 13 tokens for it, 4.0x.
    assert "suffix drafter pays on edit work" in note and "costs 3.3 one-token passes" in note and "4.0\u00d7" in note


def test_a_pair_that_is_not_gguf_files_stays_on_torch(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    c = rc.choose(str(folder))
    assert c.runtime == "torch" and "GGUF" in c.reason


def test_the_settings_take_each_registered_runtime_and_refuse_others():
    from specviz.choices import RUNTIMES
    from specviz.settings import SettingsError, from_request

    assert RUNTIMES.names == ("auto", "torch", "llama.cpp")
    for name in RUNTIMES.names:
        assert from_request({"runtime": name}).runtime == name
    with pytest.raises(SettingsError, match="runtime must be one of auto, torch, llama.cpp"):
        from_request({"runtime": "onnx"})


def test_the_cache_key_holds_the_cpus_flags_as_recorded_choices_are_filed(monkeypatch):
    # A choice's file is named by a digest of its key; the flags part is the flags line's words
    # after "flags", ':' included, so a machine's recorded choices keep their file names.
    from specviz.lm import timing
    from specviz.models.files import cache

    keys = []
    monkeypatch.setattr(cache, "digest", lambda key: keys.append(key) or "k")
    monkeypatch.setattr(timing, "cpu_flags", lambda: {"sse2", "avx2", "fpu"})
    rc._path("qwen-coder")
    monkeypatch.setattr(timing, "cpu_flags", lambda: set())
    rc._path("qwen-coder")
    assert [k["flags"] for k in keys] == [[":", "avx2", "fpu", "sse2"], []]
