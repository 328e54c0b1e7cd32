"""A run's output format carried to each engine's export, beside its speculative settings, and where
an engine cannot take it, the export says so.

| engine | how the format goes | source |
|---|---|---|
| vLLM | `--structured-outputs-config '{"backend": "guidance"}'`; per request `structured_outputs` = `{"json"}`, `{"regex"}`, `{"choice"}` or `{"grammar"}` | docs.vllm.ai, Features > Structured Outputs |
| SGLang | `--grammar-backend llguidance`; per request `json_schema`, `regex` or `ebnf` | docs.sglang.io, Advanced Features > Structured Outputs |
| llama.cpp | `llama-server --json-schema` or `--grammar` (GBNF; Lark only in a build with LLAMA_LLGUIDANCE) | `common/arg.cpp`, `grammars/README.md` |
| llama-cpp-python | `grammar=LlamaGrammar.from_json_schema(...)` or `LlamaGrammar.from_string(gbnf)` | llama-cpp-python's README, "JSON Schema Mode" |
| transformers | no grammar in `generate` | transformers' GenerationConfig docs |

A JSON schema is exported with specviz's way of writing JSON in its "x-guidance" options (the
separators ", " and ": ", no other whitespace), which llguidance, the backend named for vLLM and
SGLang, reads; other engines write JSON their own way, which the notes say.
"""

from __future__ import annotations

import json
import shlex

from specviz.choices import CHOICE, FREE_TEXT, GRAMMAR, JSON_SCHEMA, REGEX
from specviz.workshop.production.found import Found
from specviz.grammar.formats import JSON_STYLE, ANY_OBJECT, parse


def request_fields(kind: str, spec: str) -> dict:
    """The format as vLLM's `structured_outputs` request field takes it."""
    if kind == JSON_SCHEMA:
        return {"json": styled_schema(spec)}
    if kind == CHOICE:
        return {"choice": parse(kind, spec).choices}
    return {"regex": spec} if kind == REGEX else {"grammar": spec}  # vLLM's field names


def styled_schema(spec: str) -> dict:
    """The schema with specviz's JSON style as its llguidance options, unless it sets its own."""
    schema = json.loads(spec if spec.strip() else ANY_OBJECT)
    return {**schema, "x-guidance": {**JSON_STYLE, **schema.get("x-guidance", {})}}


def gbnf(kind: str, spec: str) -> str | None:
    """The format as llama.cpp's GBNF where it has one: a choice, or a grammar given as GBNF."""
    if kind == CHOICE:
        return "root ::= " + " | ".join(json.dumps(c) for c in parse(kind, spec).choices)
    if kind == GRAMMAR and "::=" in spec:
        return spec
    return None


def vllm(kind: str, spec: str) -> tuple[str, list[str]]:
    body = json.dumps({"structured_outputs": request_fields(kind, spec)})
    return ' \\\n  --structured-outputs-config \'{"backend": "guidance"}\'', [
        f"Each request carries the output format: {body} (the OpenAI client's extra_body). vLLM masks the "
        "target's logits with it and verifies the drafted tokens under it."
    ]


def sglang(kind: str, spec: str) -> tuple[str, list[str]]:
    field = {JSON_SCHEMA: "json_schema", REGEX: "regex"}.get(kind, "ebnf")
    value = json.dumps(styled_schema(spec)) if kind == JSON_SCHEMA else gbnf(kind, spec) or spec
    return " \\\n  --grammar-backend llguidance", [
        f"Each request's sampling_params carry {json.dumps({field: value})}. Whether SGLang's speculative "
        "worker masks the drafted tokens with it depends on its version (its newer overlap scheduler did not): "
        "check before relying on it."
    ]


def llamacpp(kind: str, spec: str) -> tuple[str, list[str]]:
    if kind == JSON_SCHEMA:
        arg = f"--json-schema {shlex.quote(json.dumps(json.loads(spec or ANY_OBJECT)))}"
        return f" \\\n  {arg}", [
            "llama.cpp converts the schema to its own GBNF, which allows whitespace specviz's JSON does not write: "
            "the same schema, possibly other spacing."
        ]
    if (grammar := gbnf(kind, spec)) is not None:
        return f" \\\n  --grammar {shlex.quote(grammar)}", []
    from llguidance import regex_to_lark

    lark = f"start: /{regex_to_lark(spec)}/" if kind == REGEX else spec
    return f" \\\n  --grammar {shlex.quote('%llguidance {}' + chr(10) + lark)}", [
        "llama.cpp reads this grammar (Lark, llguidance's syntax) only when built with -DLLAMA_LLGUIDANCE=ON; "
        "its GBNF has no regular expressions."
    ]


def llama_cpp_python(kind: str, spec: str) -> tuple[list[str], list[str]]:
    """Lines that make `grammar` and the notes; no lines where it has no such grammar."""
    if kind == JSON_SCHEMA:
        schema = json.dumps(json.loads(spec or ANY_OBJECT))
        return [f"grammar = LlamaGrammar.from_json_schema({schema!r})"], []
    if (grammar := gbnf(kind, spec)) is not None:
        return [f"grammar = LlamaGrammar.from_string({grammar!r})"], []
    return [], ["llama-cpp-python's grammars are GBNF, without regular expressions or Lark: no constraint exported."]


TRANSFORMERS_NOTE = (
    "transformers' generate takes no grammar, and a grammar logits processor (xgrammar's, llguidance's) is not "
    "told which candidate tokens assisted generation verifies: this exports the speculation without the format."
)


def carry(found: Found, fmt: str, text: str, notes: list[str]) -> str:
    """`text` (the engine `fmt`'s export of `found`) with the run's output format added, its notes
    appended to `notes`; free text, or an engine lacking the drafter, leaves it as it is."""
    kind, spec = found.output_format, found.output_spec
    if kind == FREE_TEXT or not text:
        return text
    if fmt == "transformers":
        notes.append(TRANSFORMERS_NOTE)
        return text
    if fmt == "llama-cpp-python":
        lines, more = llama_cpp_python(kind, spec)
        notes.extend(more)
        if lines:
            head, _, call = text.partition("out = llm.create_chat_completion(")
            call = call.replace("max_tokens=64,", "max_tokens=64, grammar=grammar,")
            text = head + "\n".join(lines) + "\nout = llm.create_chat_completion(" + call
        return text.replace("from llama_cpp import Llama", "from llama_cpp import Llama, LlamaGrammar")
    extra, more = {"vllm": vllm, "sglang": sglang, "llamacpp": llamacpp}[fmt](kind, spec)
    notes.extend(more)
    return text + extra
