"""A target spread by accelerate's device map: tiny models forced by `max_memory` to split
between the CPU and disk offload, run by the unchanged engine."""

from __future__ import annotations

import json

import pytest
import torch

from specviz import engine
from specviz.costs.measure import SPREAD_SIZES
from specviz.engine.load import load
from specviz.lm import clear_loaded
from specviz.lm.torch_runtime.devices import Placement, choose_placement, parse_max_memory, room_for, spread_over
from specviz.lm.torch_runtime.precision import choose_precision
from specviz.models.errors import DeviceError
from specviz.lm.torch_runtime.small_batch import _few_rows_forward
from specviz.settings import GenerationSettings
from tiny_models import CLOSE_NOISE, single_thread, tiny_model, tiny_tokenizer  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

LAYERS = 6
PROMPT = "Write a function that reverses a string"


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECVIZ_DEVICE", "cpu")
    monkeypatch.setenv("SPECVIZ_DTYPE", "float32")  # greedy outputs are compared token for token
    for name in (
        "SPECVIZ_DEVICE_MAP",
        "SPECVIZ_MAX_MEMORY",
        "SPECVIZ_INT8_DRAFT",
        "SPECVIZ_MEMORY_BUDGET_GB",
        "SPECVIZ_ALLOW_CUSTOM_MODELS",
    ):
        monkeypatch.delenv(name, raising=False)
    clear_loaded()
    yield
    clear_loaded()


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    for name, model in (
        ("target", tiny_model(0, layers=LAYERS)),
        ("draft", tiny_model(1000, layers=LAYERS, noise_from=0, noise=CLOSE_NOISE)),
    ):
        model.save_pretrained(folder / name)
        tiny_tokenizer().save_pretrained(folder / name)
    return f"{folder / 'draft'} -> {folder / 'target'}"


def cpu_room(layers_on_cpu: int) -> int:
    """Bytes of CPU memory that hold the embedding (tied to the head) and this many layers."""
    model = tiny_model(0, layers=LAYERS)
    layer = sum(p.numel() * p.element_size() for p in model.model.layers[0].parameters())
    return model.model.embed_tokens.weight.numel() * 4 + layers_on_cpu * layer


def settings(**kw) -> GenerationSettings:
    return GenerationSettings(**{"max_new_tokens": 24, "k": 4, "policy": "fixed", "temperature": 0.0, **kw})


def test_a_target_split_between_cpu_and_disk_decodes_exactly_as_plain(spec):
    seen = []
    pair = load(
        spec,
        device_map="auto",
        max_memory={"cpu": cpu_room(2)},
        int8_draft=False,
        progress=lambda f, m: seen.append((f, m)),
    )
    placed = pair.info["target"]["placement"]
    assert placed["device_map"] == "auto" and set(placed["modules"]) == {"cpu", "disk"}
    assert spread_over(pair.target) == placed["modules"]
    assert any(p.device.type == "meta" for p in pair.target.parameters())  # offloaded: fetched from disk at each pass
    assert all(p.device.type == "cpu" for p in pair.draft.parameters())  # the draft stays whole on the first device
    # Layers held on the CPU keep the few-row product, inside accelerate's hook.
    on_cpu = [m for m in pair.target.modules() if isinstance(m, torch.nn.Linear) and m.weight.device.type == "cpu"]
    assert on_cpu and all(m._old_forward.__func__ is _few_rows_forward and hasattr(m, "_hf_hook") for m in on_cpu)
    # What the target holds in memory is what the budget counts.
    assert 0 < pair.info["target"]["bytes"] < sum(p.numel() * 4 for p in tiny_model(0, layers=LAYERS).parameters())

    plain = engine.run(pair, PROMPT, settings(mode="plain"))
    for kw in (
        {"k": 1},
        {"k": 4},
        {"k": 4, "drafter": "tree"},
        {"k": 3, "drafter": "early-exit", "early_exit_layers": 2},
    ):
        spec_trace = engine.run(pair, PROMPT, settings(**kw))
        assert spec_trace.token_ids == plain.token_ids, kw
        assert spec_trace.summary.rounds == len(spec_trace.events) >= 1
    # The same target loaded whole gives the same text.
    clear_loaded()
    whole = load(spec, int8_draft=False)
    assert spread_over(whole.target) == {}
    assert engine.run(whole, PROMPT, settings(mode="plain")).token_ids == plain.token_ids

    # The load's progress: one bar that only grows, through the target's weights one by one,
    # saying where they went, then the pass costs, timed at fewer sizes for a spread target.
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    messages = [m for _, m in seen]
    assert sum("loading weights (" in m for m in messages) >= 3
    spread_said = [m for m in messages if "spread by device map" in m]
    assert spread_said and "on disk" in spread_said[0] and "on cpu" in spread_said[0]
    assert any("fewer passes are timed" in m for m in messages)
    cost = pair.cost_model
    assert sorted(cost.verify) == sorted(SPREAD_SIZES) and cost.meta["spread"] == placed["modules"]


def test_the_placement_comes_from_the_argument_or_the_environment(monkeypatch):
    assert choose_placement() == Placement() and not Placement().spread
    monkeypatch.setenv("SPECVIZ_DEVICE_MAP", "auto")
    monkeypatch.setenv("SPECVIZ_MAX_MEMORY", "cuda:0=20GiB, 1=30GiB,cpu=60GiB")
    assert choose_placement() == Placement("auto", {0: "20GiB", 1: "30GiB", "cpu": "60GiB"})
    assert choose_placement("none") == Placement()
    assert choose_placement("auto", {"cpu": 1000}).max_memory == {"cpu": 1000}
    with pytest.raises(DeviceError, match="device map"):
        choose_placement("balanced")
    with pytest.raises(DeviceError, match="SPECVIZ_MAX_MEMORY"):
        parse_max_memory("gpu=3GiB")
    with pytest.raises(DeviceError, match="SPECVIZ_MAX_MEMORY"):
        parse_max_memory("cpu=lots")
    assert parse_max_memory("cpu=1000") == {"cpu": 1000}


def test_a_spread_target_is_not_timed_per_precision_and_is_never_int8():
    cpu = torch.device("cpu")
    chosen = choose_precision(cpu, "auto", placement=Placement("auto"), measure=lambda dts: pytest.fail("timed"))
    assert chosen.target in ("bfloat16", "float32") and ("device map" in chosen.reason or chosen.target == "float32")
    with pytest.raises(DeviceError, match="device map"):
        choose_precision(cpu, "int8", placement=Placement("auto"))


def test_generate_on_the_command_line_spreads_the_target(spec, capsys):
    from specviz.workshop.cli import main
    from specviz.workshop import generate_cli as cli
    from specviz import choices
    from specviz.lm.torch_runtime import devices

    assert cli.DEVICE_MAPS is devices.DEVICE_MAPS is choices.DEVICE_MAPS  # named once, in choices
    draft, target = (s.strip() for s in spec.split("->"))
    code = main(
        [
            "generate",
            "--prompt",
            PROMPT,
            "--draft",
            draft,
            "--target",
            target,
            "--temperature",
            "0",
            "--k",
            "3",
            "--max-new-tokens",
            "8",
            "--fp32-draft",
            "--device-map",
            "auto",
            "--max-memory",
            f"cpu={cpu_room(3)}",
            "--no-warmup",
            "--json",
        ]
    )
    assert code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["new_tokens"] == 8
    assert set(out["meta"]["cost_model"]["meta"]["spread"]) == {"cpu", "disk"}


def test_the_first_device_keeps_room_for_the_draft():
    limits = {0: 80 * 2**30, 1: 80 * 2**30, "cpu": 100 * 2**30}
    kept = room_for(limits, torch.device("cuda:0"), 2 * 2**30)
    assert kept == {0: 78 * 2**30, 1: 80 * 2**30, "cpu": 100 * 2**30} and limits[0] == 80 * 2**30
    assert room_for(limits, torch.device("cuda"), 2**40)[0] == 0  # never below nothing
    assert room_for(limits, torch.device("cpu"), 0) == limits
