"""The output format: free text, or a JSON schema, a regular expression, a choice among
strings or a grammar (`choices.FORMATS`), compiled once to llguidance's grammar.

Every size that compiling grows with is bounded first (`limits.FORMAT_*`), and llguidance's
own compile work and lexer memory are capped (`limits.GRAMMAR_*`), so a hostile format (a
schema nested hundreds deep, an enum of a million values, a regular expression whose
automaton explodes) is refused in one line, in milliseconds, before any model runs.

JSON is written with the separators Python's `json.dumps` uses (", " and ": ") and no other
whitespace, unless the schema's own "x-guidance" options say otherwise: one way to write each
value, so the grammar forces every key, quote and separator (llguidance's JSON options,
docs/GRAMMAR.md). A finished output is checked by a reader independent of the engine:
`jsonschema` for a schema, the `regex` package (Python's re, with a timeout) for a regular
expression.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from specviz.choices import CHOICE, FORMATS, FREE_TEXT, JSON_SCHEMA, REGEX
from specviz.errors import UserError, shown
from specviz.limits import FORMAT_ALTERNATIVES, FORMAT_CHARS, FORMAT_DEPTH, GRAMMAR_FUEL, GRAMMAR_SIZE, GRAMMAR_STATES

# How JSON is written (llguidance's JSON compile options); a schema's "x-guidance" overrides them.
JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
ANY_OBJECT = '{"type": "object"}'  # a JSON format without a schema
CHECK_S = 1.0  # the longest a finished output's check against a regular expression may take


class FormatError(UserError):
    """An output format that cannot be used: the message names the problem in one line."""


@dataclass(frozen=True)
class OutputFormat:
    """A compiled output format: its kind (a `FORMATS` name), the text it was given and
    llguidance's grammar for it."""

    kind: str
    source: str
    engine_text: str

    @property
    def schema(self) -> dict | None:
        """A JSON format's schema (as given, "x-guidance" included)."""
        return json.loads(self.source) if self.kind == JSON_SCHEMA else None

    @property
    def choices(self) -> list[str] | None:
        return choice_list(self.source) if self.kind == CHOICE else None


def parse(kind: str, spec: str) -> OutputFormat | None:
    """The compiled format (None for free text), or FormatError naming what is wrong."""
    if kind not in FORMATS:
        raise FormatError(f"output format must be one of {', '.join(FORMATS.names)} (got {shown(kind)})")
    if kind == FREE_TEXT:
        if spec.strip():
            raise FormatError("free text takes no schema, pattern, list or grammar: choose an output format for it")
        return None
    FORMAT_CHARS.check_text(spec)
    return _compiled(kind, spec)


@functools.lru_cache(maxsize=64)
def _compiled(kind: str, spec: str) -> OutputFormat:
    import llguidance

    if kind == JSON_SCHEMA:
        spec = spec if spec.strip() else ANY_OBJECT
        _check_json(spec)
        text = llguidance.LLMatcher.grammar_from_json_schema(spec, defaults=JSON_STYLE)
    elif kind == REGEX:
        if not spec:
            raise FormatError("the regular expression is empty")
        text = llguidance.LLMatcher.grammar_from_regex(spec)
    elif kind == CHOICE:
        text = llguidance.LLMatcher.grammar_from_lark("start: " + " | ".join(json.dumps(c) for c in choice_list(spec)))
    else:
        text = _lark(spec)
    problem = llguidance.LLMatcher.validate_grammar(text, None, limits=engine_limits())
    if problem:
        raise FormatError(f"the {FORMATS[kind].label.lower()} cannot be used: {_first_line(problem)}")
    return OutputFormat(kind, spec, text)


def _check_json(spec: str) -> None:
    """A schema's nesting and alternatives bounded, counted in one scan before it is parsed."""
    FORMAT_DEPTH.check(nesting(spec))
    try:
        schema = json.loads(spec)
    except ValueError as e:
        raise FormatError(f"the JSON schema is not JSON: {e}") from None
    if not isinstance(schema, dict):
        raise FormatError('a JSON schema is a JSON object, such as {"type": "object", "properties": {...}}')
    FORMAT_ALTERNATIVES.check(alternatives(schema))


def _lark(spec: str) -> str:
    """A grammar in llguidance's Lark syntax, or llama.cpp's GBNF (converted to Lark)."""
    import llguidance
    from llguidance.gbnf_to_lark import any_to_lark

    if not spec.strip():
        raise FormatError("the grammar is empty")
    try:
        return llguidance.LLMatcher.grammar_from_lark(any_to_lark(spec))
    except Exception as e:  # the converter's own error types
        raise FormatError(f"the grammar cannot be read as Lark or GBNF: {_first_line(str(e))}") from None


def choice_list(spec: str) -> list[str]:
    """A choice's strings: a JSON list of strings, or else one a line (blank lines skipped)."""
    if spec.lstrip().startswith("["):
        try:
            items = json.loads(spec)
        except ValueError as e:
            raise FormatError(f"the list of choices is not a JSON list: {e}") from None
        if not isinstance(items, list) or not all(isinstance(c, str) for c in items):
            raise FormatError("a JSON list of choices holds strings only")
    else:
        items = [line for line in spec.splitlines() if line.strip()]
    if not items or not all(items):
        raise FormatError("the list of choices needs at least one string, and no empty one")
    FORMAT_ALTERNATIVES.check(len(items))
    return items


def nesting(text: str) -> int:
    """The deepest nesting of JSON objects and lists in `text`, brackets inside strings not counted."""
    depth = deepest = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def alternatives(schema: Any) -> int:
    """enum values and anyOf / oneOf branches anywhere in a schema (parsed, its nesting bounded)."""
    if isinstance(schema, list):
        return sum(alternatives(x) for x in schema)
    if not isinstance(schema, dict):
        return 0
    own = sum(len(schema[k]) for k in ("enum", "anyOf", "oneOf") if isinstance(schema.get(k), list))
    return own + sum(alternatives(v) for v in schema.values())


def engine_limits():
    """llguidance's limits for compiling and matching, from `limits.GRAMMAR_*`."""
    import llguidance

    return llguidance.LLParserLimits(
        initial_lexer_fuel=int(GRAMMAR_FUEL.value),
        max_lexer_states=int(GRAMMAR_STATES.value),
        max_grammar_size=int(GRAMMAR_SIZE.value),
        verbose_errors=False,
    )


def _first_line(message: str) -> str:
    """An engine's message in one line: its first line, and the line that says the error where
    it is further down (a regular expression's parser points at the place first)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()] or [message]
    cause = next((line for line in lines[1:] if line.startswith("error:")), "")
    return f"{lines[0].removesuffix(':')}: {cause.removeprefix('error:').strip()}"[:200] if cause else lines[0][:200]


def canonical_json(value: Any) -> str:
    """`value` written as the JSON format writes it (JSON_STYLE)."""
    return json.dumps(value, ensure_ascii=False, separators=(JSON_STYLE["item_separator"], JSON_STYLE["key_separator"]))


def check_output(fmt: OutputFormat | None, text: str, stop_reason: str) -> str:
    """How a finished run's text stands against its format, in words: "" for free text,
    "valid", or what is wrong ("cut by the token limit: ..." when the run ran out of tokens)."""
    if fmt is None:
        return ""
    problem = _problem(fmt, text)
    if not problem:
        return "valid"
    return f"cut by the token limit: {problem}" if stop_reason == "max_new_tokens" else f"invalid: {problem}"


def _problem(fmt: OutputFormat, text: str) -> str:
    if fmt.kind == JSON_SCHEMA:
        import jsonschema

        try:
            value = json.loads(text)
        except ValueError as e:
            return f"not JSON ({e})"
        schema = {k: v for k, v in fmt.schema.items() if k != "x-guidance"}
        try:
            jsonschema.validators.validator_for(schema)(schema).validate(value)
        except jsonschema.ValidationError as e:
            return f"the schema refuses it at {e.json_path}: {e.message}"[:300]
        return ""
    if fmt.kind == REGEX:
        import regex  # Python's re with a timeout: a pattern may backtrack for ever on text it refuses

        try:
            whole = regex.fullmatch(fmt.source, text, timeout=CHECK_S)
        except regex.error as e:
            return f"Python's regex cannot read this pattern ({e})"
        except TimeoutError:
            return f"not checked: the pattern took over {CHECK_S:g} s on it"
        return "" if whole else "the regular expression does not match it whole"
    if fmt.kind == CHOICE:
        return "" if text in fmt.choices else "not one of the choices"
    return _grammar_problem(fmt, text)


def _grammar_problem(fmt: OutputFormat, text: str) -> str:
    """A grammar has no reader besides its engine: llguidance's matcher reads the text's bytes."""
    import llguidance

    ll = _byte_tokenizer()
    m = llguidance.LLMatcher(ll, fmt.engine_text, limits=engine_limits(), log_level=0)
    ok = m.consume_tokens(list(text.encode("utf-8"))) and m.is_accepting()
    return "" if ok else "the grammar does not accept it whole"


@functools.cache
def _byte_tokenizer():
    """A tokenizer with one token per byte, for reading text with llguidance."""
    import llguidance

    return llguidance.LLTokenizer("byte")
