"""The sizes and counts a visitor sends besides the settings (specviz/limits.py): each refused
in one line naming the value, the limit and its variable, by every function that takes it,
before the work that grows with it; docs/DEPLOYING.md lists each one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specviz import limits, theory
from specviz.errors import UserError
from specviz.workshop.labs import batching, sweep
from specviz.limits import LimitError
from specviz.models.catalogue.sources import check_typed, resolve
from specviz.workshop.production.metrics import MetricsError, read

ROOT = Path(__file__).resolve().parents[1]
PROM = (
    'vllm:spec_decode_num_drafts_total{{model_name="m"}} 10\n'
    'vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} 40\n'
    'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} 20\n'
    'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="m",position="{p}"}} {n}\n'
)
ONE_LINE = re.compile(r"^[^\n]+ is [\d,.e+]+( \w+)?; the limit is [\d,.]+( \w+)? \(SPECVIZ_[A-Z_]+\)$")


def refusal(fn, *args, **kw) -> str:
    with pytest.raises(LimitError) as e:
        fn(*args, **kw)
    assert ONE_LINE.match(str(e.value)), str(e.value)
    return str(e.value)


def test_each_limit_has_its_own_variable_and_a_row_in_the_deploying_doc():
    envs = [lim.env for lim in limits.ALL]
    assert len(set(envs)) == len(envs) and all(e.startswith("SPECVIZ_MAX_") for e in envs)
    doc = (ROOT / "docs" / "DEPLOYING.md").read_text()
    for row in limits.table().splitlines():
        assert row in doc, row


def test_a_limit_follows_its_variable_and_refuses_a_bad_one(monkeypatch):
    assert limits.K_MAX.value == 64
    monkeypatch.setenv("SPECVIZ_MAX_K", "8")
    assert limits.K_MAX.value == 8
    assert refusal(theory.best_k, 0.8, 30, 5, k_max=9) == "k_max is 9; the limit is 8 (SPECVIZ_MAX_K)"
    for bad in ("0", "-1", "abc", "inf"):
        monkeypatch.setenv("SPECVIZ_MAX_K", bad)
        with pytest.raises(LimitError, match=f"SPECVIZ_MAX_K is '{bad}'; it must be a number above 0"):
            limits.check_environment()


def test_metrics_payloads_are_refused_before_the_lists_they_ask_for():
    assert read(PROM.format(p=2, n=3))[0].per_position == [0, 0, 3]
    assert "the position label is 10,000,000,000; the limit is 256" in refusal(read, PROM.format(p=10**10, n=3))
    assert "the limit is 2,000,000 bytes" in refusal(read, "x" * 2_000_001)
    assert "the limit is 2,000,000 bytes" in refusal(read, "\u00e9" * 1_000_001)  # two bytes each in UTF-8
    long_label = PROM.format(p=0, n=1).replace('"m",', '"' + "a" * 5000 + '",')
    assert "line 4 is 5,0" in refusal(read, long_label) and "the limit is 4,096 characters" in refusal(read, long_label)
    hist = {
        "num_spec_steps": 300,
        "num_draft_tokens": 1,
        "num_accepted_draft_tokens": 1,
        "acceptance_histogram": [1] * 300,
    }
    assert "acceptance_histogram's length less one is 299" in refusal(read, json.dumps(hist))
    with pytest.raises(MetricsError, match="nests too deeply"):
        read("[" * 100_000 + "]" * 100_000)
    with pytest.raises(MetricsError, match="finite number"):
        read(PROM.format(p=0, n="+Inf"))


def test_a_histogram_gives_the_counts_by_position_it_always_gave():
    hist = {
        "num_spec_steps": 10,
        "num_draft_tokens": 30,
        "num_accepted_draft_tokens": 14,
        "acceptance_histogram": [3, 2, 3, 2],
    }
    # Steps that accepted at least i drafts: 7 at position 1, 5 at 2, 2 at 3.
    assert read(json.dumps(hist))[0].per_position == [7, 5, 2]


def test_labels_are_read_one_after_another_and_an_unclosed_one_ends_them():
    text = PROM.format(p=1, n=4).replace('position="1"', 'position="1", other="a\\"b"')
    assert read(text)[0].per_position == [0, 4]
    # An unclosed label's line names no model (its labels are not read): a series of no model's own.
    unclosed = PROM.format(p=1, n=4) + 'vllm:spec_decode_num_drafts_total{model_name="' + "a" * 4000 + "} 1\n"
    with pytest.raises(MetricsError, match="^vLLM: no spec_decode_num_draft_tokens series"):
        read(unclosed)


def test_k_max_and_speedups_k_are_bounded():
    assert theory.best_k(0.8, 30, 5, k_max=64)[0] >= 1
    assert refusal(theory.best_k, 0.8, 30, 5, k_max=5_000_000) == "k_max is 5,000,000; the limit is 64 (SPECVIZ_MAX_K)"
    assert refusal(theory.speedup, 0.8, 10**9, 30, 5) == "k is 1,000,000,000; the limit is 64 (SPECVIZ_MAX_K)"
    with pytest.raises(UserError, match="target_ms must be above 0 and finite"):
        theory.speedup(0.8, 4, float("inf"), 5)


def test_lossless_inputs_are_bounded_before_they_are_parsed():
    from specviz.workshop.lossless import parse_distribution, simulate

    assert "p is 70,000 characters" in refusal(parse_distribution, "1" * 70_000, "p")
    assert "p's length is 2,000; the limit is 1,024" in refusal(parse_distribution, ",".join(["0"] * 2000), "p")
    assert "samples is 30,000,000" in refusal(simulate, [0.5, 0.5], [0.5, 0.5], 30_000_000)
    assert "q's length is 2,000" in refusal(simulate, [1.0], [0.0] * 1999 + [1.0])


def test_the_sweep_and_the_batching_lab_are_bounded():
    assert sweep.parse_temperatures("0,0.5") == [0.0, 0.5]
    assert "the number of temperatures is 9; the limit is 8" in refusal(
        sweep.parse_temperatures, ",".join(str(t / 10) for t in range(9))
    )
    assert "the temperatures is 300 characters" in refusal(sweep.parse_temperatures, "0" * 300)
    assert "the batch size is 100" in refusal(batching._check_sizes, [1, 100], [1, 2])
    assert "the number of batch sizes is 9" in refusal(batching._check_sizes, list(range(1, 10)), [1, 2])
    assert "repeats is 1,000" in refusal(batching._check_sizes, [1], [1, 2], 1000)


def test_the_sweeps_time_is_shared_out_and_runs_out(monkeypatch):
    import time

    now = time.monotonic()
    assert sweep.wall_left(now, 300.0) == 300.0  # at most a run's own limit
    assert 0 < sweep.wall_left(now - 550, 300.0) <= 50.0  # what is left of the sweep's 600 s
    assert sweep.wall_left(now - 600, 300.0) == 0.0
    monkeypatch.setenv("SPECVIZ_MAX_SWEEP_S", "1000")
    assert sweep.wall_left(now - 800, None) == pytest.approx(200.0, abs=1.0)


def test_a_pair_is_checked_as_typed_before_anything_looks_for_it():
    from specviz.models.catalogue.sources import HUB_ID

    assert "the pair is 600 characters" in refusal(check_typed, "a" * 600)
    assert "the pair is 600 characters" in refusal(resolve, ("a" * 300, "b" * 300))
    # A side that climbs a folder is no Hub id, so a page that allows only Hub ids refuses it by its shape alone.
    assert HUB_ID.match("Qwen/Qwen2.5-0.5B-Instruct") and not any(HUB_ID.match(s) for s in ("x/..", "../a", "a/../b"))
