"""A run's output format goes to each engine's export beside its speculative settings, in the
engine's own words, and where an engine cannot take it, the export says so."""

from __future__ import annotations

import ast
import json

import pytest

from specviz.choices import CHOICE, GRAMMAR, JSON_SCHEMA, LOOKUP, MODEL, REGEX
from specviz.settings import from_request
from specviz.workshop.production import found
from specviz.workshop.production.export import FORMATS, export

SCHEMA = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
SPECS = {JSON_SCHEMA: SCHEMA, REGEX: "[0-9]{3}/[a-z]+", CHOICE: "yes\nno", GRAMMAR: 'root ::= "a" [0-9]+'}


def exported(kind: str, drafter: str, engine: str):
    s = from_request({"drafter": drafter, "k": 4, "policy": "fixed", "output_format": kind, "output_spec": SPECS[kind]})
    return export(found.from_settings("qwen-coder", s), engine)


@pytest.mark.parametrize("kind", list(SPECS))
def test_vllm_and_sglang_take_the_format_per_request_beside_the_speculative_config(kind):
    v = exported(kind, MODEL, "vllm")
    assert "--speculative-config" in v.text and '--structured-outputs-config \'{"backend": "guidance"}\'' in v.text
    body = json.loads(next(n for n in v.notes if "structured_outputs" in n).split("format: ")[1].split(" (the")[0])
    field = {JSON_SCHEMA: "json", REGEX: "regex", CHOICE: "choice", GRAMMAR: "grammar"}[kind]
    assert list(body["structured_outputs"]) == [field]
    if kind == JSON_SCHEMA:  # specviz's way of writing JSON goes with the schema
        assert body["structured_outputs"]["json"]["x-guidance"]["item_separator"] == ", "
    s = exported(kind, LOOKUP, "sglang")
    assert "--speculative-algorithm NGRAM" in s.text and "--grammar-backend llguidance" in s.text
    assert any("depends on its version" in n for n in s.notes)


def test_llama_server_takes_a_schema_or_gbnf_and_says_what_needs_llguidance():
    assert '--json-schema \'{"type": "object"' in exported(JSON_SCHEMA, MODEL, "llamacpp").text
    assert '--grammar \'root ::= "yes" | "no"\'' in exported(CHOICE, LOOKUP, "llamacpp").text
    assert "--grammar 'root ::= \"a\" [0-9]+'" in exported(GRAMMAR, LOOKUP, "llamacpp").text
    regex = exported(REGEX, MODEL, "llamacpp")
    assert "%llguidance {}" in regex.text and "start: /[0-9]{3}\\/[a-z]+/" in regex.text
    assert any("LLAMA_LLGUIDANCE=ON" in n for n in regex.notes)


@pytest.mark.parametrize("kind", [JSON_SCHEMA, CHOICE])
def test_llama_cpp_python_code_runs_with_the_grammar(kind):
    e = exported(kind, LOOKUP, "llama-cpp-python")
    tree = ast.parse(e.text)  # valid Python
    call = next(
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "create_chat_completion"
    )
    assert any(k.arg == "grammar" for k in call.keywords) and "LlamaGrammar" in e.text


def test_where_an_engine_cannot_combine_the_two_the_export_says_so():
    t = exported(JSON_SCHEMA, MODEL, "transformers")
    assert "assistant_model" in t.text and any("takes no grammar" in n for n in t.notes)
    r = exported(REGEX, LOOKUP, "llama-cpp-python")
    assert "grammar" not in r.text.split("import")[-1] and any("no constraint exported" in n for n in r.notes)


def test_free_text_exports_as_before():
    s = from_request({"drafter": MODEL, "k": 4, "policy": "fixed"})
    for engine in FORMATS:
        e = export(found.from_settings("qwen-coder", s), engine)
        assert "structured" not in e.text and "grammar" not in e.text.lower()
