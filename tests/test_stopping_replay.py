"""scripts/stopping_replay.py: stopping rules replayed over a draft's hits and misses.

Rows here are synthetic (hit or miss, confidence); costs are round numbers, so the expected
figures are worked out by hand below. No speed of any machine is asserted.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from specviz.cost_model import CostModel

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "stopping_replay.py"
spec = importlib.util.spec_from_file_location("stopping_replay", SCRIPT)
replay_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay_mod)

# V(n) = 100 ms for any n up to 17, D = 10 ms, 5 ms of loop a round
FLAT = CostModel(verify={1: 100.0, 17: 100.0}, draft=10.0)


def test_a_constant_k_over_hits_only_makes_rounds_of_k_plus_one():
    rows = [(True, 0.9)] * 12
    r = replay_mod.replay(rows, replay_mod.Threshold(2, 0.0), FLAT, 5.0)
    # 4 rounds of 3 tokens, each 2 * 10 + 100 + 5 = 125 ms: 12 tokens in 500 ms
    assert (r["rounds"], r["mean_k"]) == (4, 2.0)
    assert r["tokens_per_s"] == pytest.approx(24.0)


def test_a_round_ends_at_the_first_miss_and_a_threshold_stops_after_an_unsure_draft():
    # hit, miss, hit, hit: k = 4 drafts four, accepts one, emits the target's token: 2 tokens
    rows = [(True, 0.9), (False, 0.9), (True, 0.9), (True, 0.9)]
    r = replay_mod.replay(rows, replay_mod.Threshold(4, 0.0), FLAT, 0.0)
    # round 1 at 0: 4 drafts (140 ms), tokens 0-1; round 2 at 2: 2 drafts (120 ms), 2 tokens
    assert r["rounds"] == 2 and r["tokens_per_s"] == pytest.approx(4 / 260 * 1000)
    # a threshold of 0.5 stops after the first draft of confidence 0.3
    unsure = [(True, 0.3), (True, 0.9), (True, 0.9)]
    r = replay_mod.replay(unsure, replay_mod.Threshold(20, 0.5), FLAT, 0.0)
    # round 1: one draft (accepted) + the target's token; round 2 drafts the last one: 2 rounds
    assert r["rounds"] == 2 and r["mean_k"] == 1.0


def test_no_rule_beats_the_perfect_one():
    rng = random.Random(3)
    for _ in range(20):
        rows = [(rng.random() < 0.7, rng.random()) for _ in range(200)]
        perfect = replay_mod.replay(rows, replay_mod.Perfect(rows), FLAT, 2.0)["tokens_per_s"]
        others = [
            replay_mod.replay(rows, replay_mod.Threshold(k, t), FLAT, 2.0)["tokens_per_s"]
            for k in (1, 4, 20)
            for t in (0.0, 0.5)
        ]
        others.append(replay_mod.cost_aware(rows, FLAT, 2.0, 16)["tokens_per_s"])
        assert perfect >= max(others)


def test_the_table_has_every_rule_and_the_hindsight_bound_is_at_least_the_best_single_threshold():
    rng = random.Random(5)
    prompts = {
        p: [(rng.random() < a, min(1.0, a + rng.uniform(-0.3, 0.3))) for _ in range(150)]
        for p, a in (("easy", 0.9), ("hard", 0.4))
    }
    t = replay_mod.table(prompts, FLAT, 2.0, 16)
    overall = t["overall"]
    assert {"cost-aware", "transformers default", "transformers k4", "perfect"} <= set(overall)
    assert overall["best threshold in hindsight, per prompt"] >= overall[f"threshold {t['best_threshold']}"]
    assert overall["perfect"] >= overall["best threshold in hindsight, per prompt"]


def test_loop_costs_come_from_the_rounds_after_the_first():
    trace = {
        "events": [
            {"t_end_s": 0.5, "draft_ms": 50.0, "verify_ms": 100.0, "drafted": [1, 2]},  # holds the prefill: left out
            {"t_end_s": 0.65, "draft_ms": 30.0, "verify_ms": 110.0, "drafted": [1, 2, 3]},
            {"t_end_s": 0.79, "draft_ms": 10.0, "verify_ms": 120.0, "drafted": [1]},
        ]
    }
    d, other = replay_mod.loop_costs([trace])
    # 40 ms over 4 drafts; (150 - 140) and (140 - 130) ms beyond the passes
    assert d == pytest.approx(10.0) and other == pytest.approx(10.0)


def test_loop_costs_leave_out_the_prefills_token_and_the_drafters_first_read():
    trace = {
        "events": [
            {"t_end_s": 0.5, "draft_ms": 0.0, "verify_ms": 0.1, "drafted": []},  # the target's prefill gave this token
            {
                "t_end_s": 0.9,
                "draft_ms": 50.0,
                "verify_ms": 100.0,
                "drafted": [1, 2],
            },  # the drafter read the prompt first
            {"t_end_s": 1.05, "draft_ms": 30.0, "verify_ms": 110.0, "drafted": [1, 2, 3]},
            {"t_end_s": 1.19, "draft_ms": 10.0, "verify_ms": 120.0, "drafted": [1]},
        ]
    }
    d, other = replay_mod.loop_costs([trace])
    assert d == pytest.approx(10.0) and other == pytest.approx(10.0)
