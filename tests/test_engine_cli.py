"""`python -m specviz generate`: arguments, JSON output and the terminal rendering."""

import argparse
import io
import json

import pytest

from specviz.workshop.cli import main
from specviz.workshop import generate_cli as cli
from specviz.events import Trace
from specviz.app.live import k_for_policy
from specviz.settings import GenerationSettings, from_request
from tiny_models import single_thread, tiny_pair  # noqa: F401 (single_thread: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")

SUMMARY_KEYS = {
    "new_tokens",
    "rounds",
    "target_passes",
    "draft_passes",
    "acceptance_rate",
    "mean_overlap",
    "tokens_per_round",
    "wall_s",
    "tokens_per_s",
    "target_ms",
    "draft_ms",
    "load_s",
}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(["--prompt", "Write a function", *argv])


def test_arguments_become_settings():
    args = parse(
        "--k",
        "6",
        "--adaptive",
        "--temperature",
        "0.7",
        "--top-p",
        "0.9",
        "--top-k",
        "20",
        "--max-new-tokens",
        "5",
        "--seed",
        "3",
        "--drafter",
        "lookup",
        "--raw",
    )
    assert cli.settings_from(args) == GenerationSettings(
        k=6,
        policy="cost-aware",
        temperature=0.7,
        top_p=0.9,
        top_k=20,
        max_new_tokens=5,
        seed=3,
        drafter="lookup",
        raw=True,
    )
    assert cli.pair_spec(parse(), True) == "qwen-coder"
    assert cli.pair_spec(parse("--draft", "a", "--target", "b"), True) == ("a", "b")
    assert cli.pair_spec(parse("--target", "b"), False) == "b"


def test_k_defaults_to_the_policys_k_everywhere():
    # A fixed k starts at 4; the adaptive policies' cap at the largest k offered (16).
    assert cli.settings_from(parse("--policy", "fixed")).k == 4
    assert cli.settings_from(parse()).k == 16 and cli.settings_from(parse("--policy", "heuristic")).k == 16
    assert cli.settings_from(parse("--policy", "fixed", "--k", "7")).k == 7
    assert from_request({"policy": "fixed"}).k == 4 and from_request({"adaptive": False}).k == 4
    assert from_request({}).k == GenerationSettings().k == 16
    assert from_request({"policy": "fixed", "k": 9}).k == 9  # a recorded k reruns as recorded
    # The page's k follows a policy change only while it is the old policy's default.
    assert k_for_policy("fixed", 16) == 4 and k_for_policy("cost-aware", 4) == 16
    assert k_for_policy("fixed", 7) == 7 and k_for_policy("heuristic", 16) == 16


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--k", "0"], "k must be"),
        (["--temperature", "3"], "temperature must be"),
        (["--pair", "qwen-coder", "--target", "x"], "either --pair"),
        (["--draft", "x"], "needs a --target"),
    ],
)
def test_bad_arguments_fail_with_one_line(argv, message, capsys):
    assert main(["generate", "--prompt", "hi", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_json_output_is_one_trace_object():
    out = io.StringIO()
    settings = GenerationSettings(max_new_tokens=12, k=3)
    assert cli.generate(tiny_pair("close"), "Write a function", settings, as_json=True, out=out) == 0
    data = json.loads(out.getvalue())
    assert {"text", "token_ids", "events", "summary"} <= data.keys()
    assert SUMMARY_KEYS <= data["summary"].keys()
    assert len(data["token_ids"]) == data["summary"]["new_tokens"] == 12
    trace = Trace.from_dict(data)
    assert trace.text == tiny_pair("close").tokenizer.decode(trace.token_ids, skip_special_tokens=True)


@pytest.mark.parametrize("mode", ["speculative", "plain"])
def test_text_output_then_a_summary_line(mode):
    out = io.StringIO()
    settings = GenerationSettings(max_new_tokens=12, mode=mode)
    cli.generate(tiny_pair("close"), "Write a function", settings, as_json=False, out=out, color=False)
    text, summary, end = out.getvalue().rsplit("\n", 2)
    expected = json.loads(_json_run(settings))["text"]
    assert text == expected and end == ""
    assert "12 tokens" in summary and ("acceptance" in summary) == (mode == "speculative")
    assert "\x1b[" not in out.getvalue()


def test_terminal_colours_every_decision():
    out = io.StringIO()
    cli.generate(
        tiny_pair("close"),
        "Write a function",
        GenerationSettings(max_new_tokens=30, k=4, policy="fixed"),
        as_json=False,
        out=out,
        color=True,
    )
    shown = out.getvalue()
    for kind in ("accepted", "rejected", "resampled", "bonus"):
        assert cli.STYLES[kind] in shown, kind


def _json_run(settings) -> str:
    out = io.StringIO()
    cli.generate(tiny_pair("close"), "Write a function", settings, as_json=True, out=out)
    return out.getvalue()
