"""A drafter registered in `choices.DRAFTERS` is found everywhere a drafter is chosen: the
settings, the page's radio, the CLI's --drafter, the bench's sv-<name>, and the engine, whose
greedy output with it equals plain greedy output. A runtime registered in `choices.RUNTIMES`
(with its models, LM and loader, `tests/toy_runtime.py`) is offered in the same places, loads
through the engine and decodes as torch does. A tab added to `parts.TABS` (`tests/toy_tab.py`)
is built and redrawn after a run, and so is a panel added to a tab in `parts.PANELS`
(`tests/toy_panel.py`), whose button is wired. Also: each choice's names are spelled in
one place in specviz/ (its registry), so the registries are the only lists to extend."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from specviz import choices
from specviz.choices import DRAFTERS, MODES, POLICIES, RUNTIMES, VOCAB_METHODS
from specviz.events import RoundEvent, load_trace
from specviz.settings import GenerationSettings, SettingsError, from_request
from tiny_models import tiny_pair
from toy_drafter import ENTRY
import toy_runtime as toy_runtime_module
from specviz.engine.generation import run

ROOT = Path(__file__).resolve().parents[1] / "specviz"


@pytest.fixture
def toy():
    with DRAFTERS.added(ENTRY) as entry:
        yield entry


def test_the_settings_take_a_registered_drafter_and_refuse_it_once_it_is_gone(toy):
    assert from_request({"drafter": toy.name}).drafter == toy.name
    assert not from_request({"drafter": toy.name}).needs_draft


def test_a_drafter_is_refused_when_not_registered():
    with pytest.raises(SettingsError, match="drafter must be one of model, tree, lookup"):
        from_request({"drafter": ENTRY.name})


def test_the_page_offers_a_registered_drafter(toy):
    from specviz.app.config import PageConfig
    from specviz.app.page import build_page

    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    radio = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "drafter")
    assert (toy.label, toy.name) in [tuple(c) for c in radio.choices]


def test_the_cli_offers_a_registered_drafter(toy):
    from specviz.workshop import generate_cli as cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--prompt", "x", "--drafter", toy.name])
    assert cli.settings_from(args).drafter == toy.name
    assert toy.name in parser.format_help()


def test_the_bench_runs_a_registered_drafter_as_a_method(toy):
    from specviz.workshop.bench.methods import parse_method, sv_settings

    method = parse_method(f"sv-{toy.name}")
    assert method.family == "sv" and not method.needs_draft
    assert sv_settings(method, GenerationSettings(), 16).drafter == toy.name


@pytest.mark.parametrize("policy", POLICIES.names)
def test_a_registered_drafter_runs_in_the_engine_and_greedy_equals_plain(toy, policy):
    from specviz.engine.generation import run

    pair = tiny_pair("close")
    prompt = "aaaa bbbb aaaa bbbb"
    plain = run(pair, prompt, GenerationSettings(mode="plain", max_new_tokens=24))
    spec = run(pair, prompt, GenerationSettings(drafter=toy.name, policy=policy, k=4, max_new_tokens=24))
    assert spec.token_ids == plain.token_ids
    if policy == "fixed":  # the others may rightly stop drafting on a slow or busy machine
        assert sum(len(e.drafted) for e in spec.events if isinstance(e, RoundEvent)) > 0


def test_a_registered_drafter_brings_its_own_cost_and_the_cost_aware_policy_prices_it(toy, monkeypatch):
    # The toy's entry names its own price (toy_drafter.draft_ms); the policy reads it through the
    # entry, and the policy's module names no drafter.
    import toy_drafter

    from specviz.drafters import cost_aware, make_length

    pair = tiny_pair("close")
    settings = GenerationSettings(drafter=toy.name, k=4, max_new_tokens=24)
    cost = pair.cost_model if pair.cost_model is not None else cost_aware.CostModel({1: 10.0}, 1.0)
    monkeypatch.setattr(pair, "cost_model", cost)
    for price in (0.0, 100 * cost.target):
        monkeypatch.setattr(toy_drafter, "PRICE_MS", price)
        assert make_length(pair, settings).priced().draft == price
    # Priced at 100 one-token passes a drafted token can never pay, whatever this machine's passes
    # cost: the run decodes plainly, each round saying why. Priced free on a flat V(n), it drafts.
    monkeypatch.setattr(pair, "cost_model", cost_aware.CostModel({n: 10.0 for n in range(1, 6)}, 1.0))
    monkeypatch.setattr(toy_drafter, "PRICE_MS", 1000.0)
    rounds = [e for e in run(pair, "aaaa bbbb", settings).events if isinstance(e, RoundEvent)][1:]
    assert rounds and not any(e.drafted for e in rounds) and {e.policy_note for e in rounds} == {"no-draft-pays"}
    monkeypatch.setattr(toy_drafter, "PRICE_MS", 0.0)
    rounds = [e for e in run(pair, "aaaa bbbb", settings).events if isinstance(e, RoundEvent)][1:]
    assert rounds[0].drafted and not rounds[0].policy_note
    source = Path(cost_aware.__file__).read_text()
    assert not any(f'"{name}"' in source or name.upper().replace("-", "_") in source for name in DRAFTERS.names)


def _literals(path: Path, *, fields: bool = True) -> list[tuple[str, int]]:
    """The string literals of a module, less its docstrings; `fields=False` also leaves out
    dict keys and subscripts (a field's name, such as a token's "text")."""
    tree = ast.parse(path.read_text())
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    if not fields:
        for n in ast.walk(tree):
            if isinstance(n, ast.Dict):
                docs |= {id(k) for k in n.keys if k is not None}
            elif isinstance(n, ast.Subscript):
                docs.add(id(n.slice))
    return [
        (n.value, n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


# The same word naming something else: a library (torch's version, llama.cpp the engine), a
# bench method kind shared by several libraries ("lookup"), an engine's own method name.
OTHER_MEANINGS = {
    ("workshop/bench/cli.py", "torch"),
    ("costs/measure.py", "torch"),
    ("costs/runtime_choice.py", "torch"),
    ("lm/torch_runtime/precision.py", "torch"),
    ("workshop/bench/resume.py", "torch"),
    ("workshop/bench/methods.py", "llama.cpp"),
    ("workshop/production/metrics.py", "llama.cpp"),
    ("workshop/bench/methods.py", "lookup"),
    ("workshop/production/export.py", "suffix"),
    ("events.py", "tree"),  # a round's field `tree`, named in a refusal
}


def test_each_drafters_policys_and_runtimes_name_is_spelled_once():
    names = {n for r in (DRAFTERS, POLICIES, RUNTIMES) for n in r.names if n not in ("model", "auto")}
    spelled = [
        (str(p.relative_to(ROOT)), value, line)
        for p in sorted(ROOT.rglob("*.py"))
        if p.name != "choices.py"
        for value, line in _literals(p)
        if value in names
    ]
    stray = [f"{path}:{line} {value!r}" for path, value, line in spelled if (path, value) not in OTHER_MEANINGS]
    assert not stray, "use the registry's constant (specviz/choices.py) instead:\n" + "\n".join(stray)


# The same words as a field's value elsewhere: an event's type ("plain" beside "round"), a
# tokenizer's spacing style, plotly's text mode, the keys of a runtime's measured rates.
OTHER_FIELD_MEANINGS = {
    ("events.py", "plain"),
    ("models/alignment/vocab_map.py", "plain"),
    ("viz/lossless_plots.py", "text"),
    ("engine/prepare_child.py", "plain"),
    ("engine/prepare_child.py", "speculative"),
}


def test_each_modes_and_vocab_methods_name_is_spelled_once():
    names = {n for r in (MODES, VOCAB_METHODS) for n in r.names if n != "auto"}
    spelled = [
        (str(p.relative_to(ROOT)), value, line)
        for p in sorted(ROOT.rglob("*.py"))
        if p.name != "choices.py"
        for value, line in _literals(p, fields=False)
        if value in names
    ]
    stray = [f"{path}:{line} {value!r}" for path, value, line in spelled if (path, value) not in OTHER_FIELD_MEANINGS]
    assert not stray, "use the registry's constant (specviz/choices.py) instead:\n" + "\n".join(stray)


def test_the_spelling_check_finds_a_name_written_out(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""tree in a docstring is fine"""\nif settings.drafter == "tree":\n    pass\n')
    assert [v for v, _ in _literals(probe) if v in DRAFTERS] == ["tree"]


def test_each_registry_entry_is_complete():
    for registry in (DRAFTERS, POLICIES):
        for entry in registry:
            assert entry.label and entry.help and callable(_factory(entry)), entry.name
    for name in RUNTIMES.names:
        assert RUNTIMES[name].help
    assert choices.help_line(POLICIES).count(";") == len(POLICIES.names) - 1


def _factory(entry):
    import importlib

    module, _, name = entry.factory.partition(":")
    return getattr(importlib.import_module(module), name)


def test_a_value_of_any_type_is_refused_in_words():
    # a request may carry any JSON value where a name goes
    for value in ({}, [], 3, None, "Tree"):
        with pytest.raises(SettingsError, match="drafter must be one of"):
            from_request({"drafter": value})
        assert value not in POLICIES


# --- a runtime -------------------------------------------------------------------------------


@pytest.fixture
def toy_runtime():
    with RUNTIMES.added(toy_runtime_module.ENTRY) as entry:
        yield entry


@pytest.fixture(scope="module")
def toy_folders(tmp_path_factory) -> str:
    """The tiny pair's target and its close draft saved as transformers folders: a custom
    pair 'DRAFT -> TARGET'."""
    from tiny_models import CLOSE_NOISE, tiny_model, tiny_tokenizer

    root = tmp_path_factory.mktemp("toy-runtime")
    for name, model in (("target", tiny_model(0)), ("draft", tiny_model(1000, noise_from=0, noise=CLOSE_NOISE))):
        model.save_pretrained(root / name)
        tiny_tokenizer().save_pretrained(root / name)
    return f"{root / 'draft'} -> {root / 'target'}"


def test_a_registered_runtime_is_offered_in_the_settings_the_cli_and_on_the_page(toy_runtime):
    from specviz.app.config import PageConfig
    from specviz.app.page import build_page
    from specviz.workshop import generate_cli as cli

    assert from_request({"runtime": toy_runtime.name}).runtime == toy_runtime.name
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert (
        cli.settings_from(parser.parse_args(["--prompt", "x", "--runtime", toy_runtime.name])).runtime
        == toy_runtime.name
    )
    demo = build_page(PageConfig(default_pair="qwen-coder", preload=False))
    radio = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "runtime")
    assert (toy_runtime.label, toy_runtime.name) in [tuple(c) for c in radio.choices]


def test_a_registered_runtime_loads_its_pair_and_decodes_as_torch_does(toy_runtime, toy_folders):
    """Loaded through the engine's one entry point (models, then the measured cost model),
    plain greedy text equals the torch runtime's on the same weights, and speculative greedy
    text equals plain for a draft model and for prompt lookup."""
    from specviz.engine.generation import run
    from specviz.engine.load import load

    pair = load(toy_folders, runtime=toy_runtime.name)
    assert pair.runtime == toy_runtime.name and isinstance(pair.target, toy_runtime_module.ToyModel)
    assert pair.runtime_choice.runtime == toy_runtime.name
    assert pair.precision == "float32"
    prompt = "def reverse(s):\n    return"
    from specviz.lm import load_pair

    on_torch = load_pair(toy_folders, runtime=choices.TORCH, dtype="float32")
    torch_plain = run(on_torch, prompt, GenerationSettings(mode="plain", max_new_tokens=20))
    plain = run(pair, prompt, GenerationSettings(mode="plain", max_new_tokens=20))
    assert plain.token_ids == torch_plain.token_ids
    for drafter in (choices.MODEL, choices.LOOKUP):
        spec = run(pair, prompt, GenerationSettings(drafter=drafter, policy=choices.FIXED, k=3, max_new_tokens=20))
        assert spec.token_ids == plain.token_ids, drafter
        assert sum(len(e.drafted) for e in spec.events if isinstance(e, RoundEvent)) > 0


def test_a_drafter_needing_what_a_registered_runtime_lacks_is_refused_in_words(toy_runtime, toy_folders):
    from specviz.engine.generation import run
    from specviz.errors import UserError
    from specviz.lm import load_pair

    pair = load_pair(toy_folders, runtime=toy_runtime.name)
    with pytest.raises(UserError, match=f"runs on the torch runtime only; this pair runs on {toy_runtime.name}"):
        run(pair, "def f():", GenerationSettings(drafter=choices.TREE, max_new_tokens=4))


# --- a tab -----------------------------------------------------------------------------------


def redraw_after_a_run(demo, component):
    """The step of the chain that follows a Run which redraws `component` (exactly one), and
    what it writes there for the recorded greedy trace."""
    fns = list(demo.fns.values())
    run = next(f for f in fns if f.name == "run" and f.trigger_after is not None)
    chain, fn = [], run
    while (fn := next((f for f in fns if f.trigger_after == fn._id), None)) is not None:
        chain.append(fn)
    (step,) = [f for f in chain if component in f.outputs]  # redrawn once after a run
    trace = load_trace((Path(__file__).parent / "data" / "viz_trace_greedy.json").read_text())
    out = step.fn(trace, *([None] * (len(step.inputs) - 1)))
    return trace, out[step.outputs.index(component)]


def built_page(monkeypatch, **parts_changed):
    from specviz.app import page, parts
    from specviz.app.config import PageConfig

    for name, value in parts_changed.items():
        monkeypatch.setattr(parts, name, value)
    demo = page.build_page(PageConfig(default_pair="qwen-coder", preload=False))
    return demo, {getattr(b, "elem_id", None): b for b in demo.blocks.values()}


def test_a_tab_added_to_the_page_is_built_and_redrawn_from_each_new_trace(monkeypatch):
    """`tests/toy_tab.py` added to `parts.TABS` gets its own tab, and one step of the chain
    that follows a run redraws it from the run's trace (a recorded one here)."""
    from specviz.app import parts
    from toy_tab import ToyTab

    demo, by_elem = built_page(monkeypatch, TABS=(*parts.TABS, "toy_tab:ToyTab"))
    assert by_elem["tab-toy-rounds"].label == ToyTab.title
    trace, words = redraw_after_a_run(demo, by_elem["toy-rounds-words"])
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
    assert words == f"{len(trace.token_ids)} tokens in {len(rounds)} rounds"


def test_a_panel_added_to_a_tab_is_built_inside_it_wired_and_redrawn(monkeypatch):
    """`tests/toy_panel.py` added to the Labs tab in `parts.PANELS` is laid out inside that tab
    after the tab's own panels, its button is wired, and a run redraws it."""
    from specviz.app import parts

    panels = {**parts.PANELS, "labs": (*parts.PANELS["labs"], "toy_panel:ToyPanel")}
    demo, by_elem = built_page(monkeypatch, PANELS=panels)
    labs = by_elem["tab-labs"]
    words, count = by_elem["toy-panel-words"], by_elem["toy-panel-count"]
    inside = [b for b in demo.blocks.values() if _inside(demo, b, labs)]
    assert words in inside and count in inside
    assert inside.index(words) > inside.index(by_elem["metrics-words"])  # after the panels before it
    assert not any(_inside(demo, words, by_elem[f"tab-{t}"]) for t in ("live", "inspector", "traces"))
    trace, drafted = redraw_after_a_run(demo, words)
    rounds = [e for e in trace.events if isinstance(e, RoundEvent)]
    assert drafted == f"{sum(len(r.drafted) for r in rounds)} drafted tokens"
    (click,) = [f for f in demo.fns.values() if (count._id, "click") in f.targets]
    assert click.outputs == [by_elem["toy-panel-accepted"]]
    assert click.fn(trace) == f"{sum(r.accepted for r in rounds)} accepted"


def _inside(demo, block, container) -> bool:
    """Whether `block` is laid out somewhere inside `container`."""
    parent = getattr(block, "parent", None)
    while parent is not None:
        if parent is container:
            return True
        parent = getattr(parent, "parent", None)
    return False
