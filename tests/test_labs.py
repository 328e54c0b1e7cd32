"""The temperature sweep and the batching lab on tiny models, and their command lines."""

import io
import json
from dataclasses import fields, replace

import pytest
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

from specviz.workshop.cli import main
from specviz.errors import UserError
from specviz.workshop.labs import batching
from specviz.workshop.labs.batching import BatchCosts, predict
from specviz.workshop.labs.sweep import parse_temperatures, report, sweep
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.usefixtures("single_thread")

PROMPT = "for i in range(10):"
# A plain step costs 50 ms in this cost model: plain decoding runs at 20 tokens/s.
COST = {"verify": {"1": 50.0, "2": 60.0, "4": 80.0}, "draft": 5.0}


def fixed(**kw) -> GenerationSettings:
    """Fixed-k settings (the policy field where the settings have one)."""
    s = GenerationSettings(**kw)
    return replace(s, policy="fixed") if "policy" in {f.name for f in fields(s)} else s


def test_a_sweep_runs_each_temperature_with_everything_else_kept():
    settings = fixed(k=3, max_new_tokens=10, seed=7)
    progress = []
    result = sweep(
        tiny_pair("close"), PROMPT, settings, [0.0, 1.0], cost_model=COST, on_progress=lambda f, m: progress.append(f)
    )
    assert not result.cancelled
    assert [r.temperature for r in result.rows] == [0.0, 1.0]
    for row, trace in zip(result.rows, result.traces):
        assert trace.settings["temperature"] == row.temperature
        assert (trace.settings["k"], trace.settings["seed"], trace.settings["max_new_tokens"]) == (3, 7, 10)
        assert row.acceptance == trace.summary.acceptance_rate and row.new_tokens == trace.summary.new_tokens == 10
        recorded = getattr(trace.summary, "speedup_vs_plain", None)
        if recorded:
            assert row.speedup == recorded
        else:  # tokens/s over the 20 tokens/s of a 50 ms plain step
            assert row.speedup == pytest.approx(trace.summary.tokens_per_s / 20)
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert 0 < progress[0] < 0.5  # the first update comes from the first run's first round


def test_a_sweep_stops_between_rounds_and_keeps_the_finished_runs():
    seen = []

    def on_progress(fraction, message):
        seen.append(message.split(":")[0])

    # Stop as soon as the second temperature's first round is in.
    result = sweep(
        tiny_pair("close"),
        PROMPT,
        fixed(k=3, max_new_tokens=12),
        [0.0, 0.5],
        cost_model=COST,
        on_progress=on_progress,
        should_stop=lambda: "temperature 0.5" in seen,
    )
    assert result.cancelled
    assert [r.temperature for r in result.rows] == [0.0]


def test_temperatures_parse_and_refuse_what_the_settings_refuse():
    assert parse_temperatures("0, 0.7,1") == [0.0, 0.7, 1.0]
    assert parse_temperatures(" 0 ,, 0.5,") == [0.0, 0.5]  # blanks between commas are skipped
    for bad in ("", "0,x", "0,0", "3"):
        with pytest.raises(UserError):
            parse_temperatures(bad)


def test_the_sweep_command_prints_json_rows(capsys):
    out = io.StringIO()
    assert (
        report(
            tiny_pair("close"), PROMPT, fixed(k=2, max_new_tokens=6), [0.0, 0.9], as_json=True, out=out, cost_model=COST
        )
        == 0
    )
    d = json.loads(out.getvalue())
    assert [r["temperature"] for r in d["rows"]] == [0.0, 0.9] and d["cancelled"] is False
    assert {"acceptance", "tokens_per_round", "speedup"} <= d["rows"][0].keys()


def test_the_commands_refuse_bad_input_before_loading_a_model(capsys):
    assert main(["sweep", "--prompt", "x", "--temperatures", "0,hot"]) == 2
    assert "--temperatures must be numbers separated by commas, like 0,0.3,0.7,1.0 ('hot' is not one)" in (
        capsys.readouterr().err
    )
    assert main(["batching", "--batch-sizes", "1, 2,,x"]) == 2
    assert "--batch-sizes must be whole numbers separated by commas ('x' is not one)" in capsys.readouterr().err
    assert main(["bench", "--k", "2,3.5"]) == 2
    assert "--k must be whole numbers separated by commas ('3.5' is not one)" in capsys.readouterr().err
    assert main(["batching", "--pass-sizes", "2,3"]) == 2
    assert "must include 1" in capsys.readouterr().err
    assert main(["batching", "--k", "9", "--pass-sizes", "1,2,5"]) == 2
    assert "--k must be from 1 to 4" in capsys.readouterr().err


def test_the_sweep_command_loads_the_pair_as_its_flags_say(monkeypatch, capsys):
    import specviz.engine.load

    class Loaded(Exception):
        pass

    def fake_load(spec, **kw):
        raise Loaded(kw)

    monkeypatch.setattr(specviz.engine.load, "load", fake_load)
    argv = ["sweep", "--prompt", "x", "--device-map", "auto", "--max-memory", "0=2GiB,cpu=3GiB", "--runtime", "torch"]
    with pytest.raises(Loaded) as loaded:
        main(argv)
    kw = loaded.value.args[0]
    assert (kw["device_map"], kw["max_memory"], kw["runtime"]) == ("auto", "0=2GiB,cpu=3GiB", "torch")
    # A sweep runs no warm-up, so it does not offer to skip one.
    with pytest.raises(SystemExit) as refused:
        main(["sweep", "--prompt", "x", "--no-warmup"])
    assert refused.value.code == 2
    assert "unrecognized arguments: --no-warmup" in capsys.readouterr().err


def test_predicted_speedup_by_batch_size_by_hand():
    # Batch 1 passes cost the same whatever their size (a GPU at batch 1); batch 4 passes grow
    # with every token (compute-bound). alpha = 0.8, k = 2: 1 + 0.8 + 0.64 = 2.44 tokens a round.
    costs = BatchCosts([1, 4], [1, 2, 3, 5], [[100.0] * 4, [100.0, 200.0, 300.0, 500.0]], [10.0, 40.0])
    p1, p4 = predict(costs, 0.8, 2)
    assert p1.speedup == pytest.approx(2.44 * 100 / (2 * 10 + 100))
    assert p4.speedup == pytest.approx(2.44 * 100 / (2 * 40 + 300))
    assert (p1.verify_ratio, p4.verify_ratio) == (1.0, 3.0)
    # batch 1: k = 4 (the largest the 5-token pass allows) gives 3.3616 * 100 / 140
    assert (p1.best_k, p1.best_speedup) == (4, pytest.approx(3.3616 * 100 / 140))
    assert (p4.best_k, p4.best_speedup) == (0, 1.0)  # no draft length pays at batch 4
    r = batching.result(costs, 0.8, 2)
    assert r.stops_paying_at == 4 and r.best_stops_paying_at == 4
    assert "stops paying at batch 4" in " ".join(batching.explanation(r))
    assert "<- stops paying" in batching.table(r).splitlines()[-len(batching.explanation(r)) - 2]


def test_batch_costs_are_measured_on_the_tiny_pair():
    pair = tiny_pair("close")
    progress = []
    costs = batching.measure_batch_costs(
        pair, [1, 2], [1, 3], repeats=1, context=16, on_progress=lambda f, m: progress.append(f)
    )
    assert len(costs.target_ms) == 2 and all(len(row) == 2 for row in costs.target_ms)
    assert all(ms > 0 for row in costs.target_ms for ms in row) and all(ms > 0 for ms in costs.draft_ms)
    assert progress[-1] == 1.0
    with pytest.raises(UserError, match="stopped"):
        batching.measure_batch_costs(pair, [1], [1], repeats=1, context=4, should_stop=lambda: True)


def test_a_pair_on_llama_cpp_is_refused_by_the_batching_lab_in_words():
    # llama.cpp runs one sequence per pass here: the lab names the runtime it needs instead of failing inside torch.
    pytest.importorskip("llama_cpp")
    from tiny_gguf import tiny_gguf

    from specviz.lm import load_pair

    pair = load_pair(f"{tiny_gguf('close')} -> {tiny_gguf('target')}", runtime="llama.cpp")
    with pytest.raises(UserError, match="torch runtime only; this pair runs on llama.cpp"):
        batching.measure_batch_costs(pair, [1, 2], [1, 3], repeats=1, context=16)


def test_machine_figures_and_the_weights_they_are_read_against():
    pair = tiny_pair("close")
    m = batching.machine("cpu", "float32", copy_bytes=8 << 20, matmul_n=256, repeats=1, target=pair.target)
    assert m.bandwidth_gb_s > 0 and m.matmul_gflop_s > 0 and m.balance > 0
    assert m.weight_bytes == 4 * m.weight_params > 0  # fp32: four bytes a weight
