"""Each API endpoint's and MCP tool's arguments checked against the types its signature
declares, as the request asks to join the queue: before any work, and before the runs ahead of
it. One place does it for every endpoint: `guard` gives each `gr.api` endpoint a validator
built from the parameters Gradio itself publishes (`get_function_params`), so the API, a call
by fn_index and an MCP tool (which joins the same queue) meet the same check.

A list, an object, a string, true or false, NaN or infinity where a number is declared is
refused in one line that names the parameter and says what came, never repeating it:

    alpha must be a number; got a list of 400,000 items
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any

import gradio as gr
from gradio.components.api_component import Api
from gradio.utils import get_function_params

from specviz.app.shown_errors import verdict

NUMBER, WHOLE, TEXT, FLAG, NONE = "a number", "a whole number", "a string", "true or false", "null"
KINDS = {float: NUMBER, int: WHOLE, str: TEXT, bool: FLAG, type(None): NONE}


def kinds(hint: Any) -> frozenset[str] | None:
    """What a declared type lets through, or None where it declares nothing checked here
    (a list, a dict, Any)."""
    if typing.get_origin(hint) is typing.Annotated:
        return kinds(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        parts = [kinds(h) for h in typing.get_args(hint)]
        return None if any(p is None for p in parts) else frozenset().union(*parts)
    return frozenset([KINDS[hint]]) if hint in KINDS else None


def described(value: Any) -> str:
    """What a value is, in a few words: a number as itself (short), anything else by its kind
    and size, never its content (it may be huge or hostile)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "infinity" if value > 0 else "-infinity"
    if isinstance(value, (int, float)):
        text = f"{value:g}" if isinstance(value, float) else str(value)
        return text if len(text) <= 24 else f"a {len(text)}-digit number"
    sizes = {str: ("a string", "characters"), list: ("a list", "items"), dict: ("an object", "keys")}
    what, unit = sizes.get(type(value), (f"a {type(value).__name__}", "items"))
    return f"{what} of {len(value):,} {unit}" if hasattr(value, "__len__") else what


def fits(value: Any, allowed: frozenset[str]) -> bool:
    if value is None:
        return NONE in allowed
    if isinstance(value, bool):
        return FLAG in allowed
    if isinstance(value, (int, float)):
        finite = isinstance(value, int) or math.isfinite(value)
        whole = isinstance(value, int) or (finite and value.is_integer())
        return finite and (NUMBER in allowed or (WHOLE in allowed and whole))
    return isinstance(value, str) and TEXT in allowed


def refusal(name: str, value: Any, hint: Any) -> str | None:
    """Why `value` does not fit `name`'s declared type, in one line; None where it does."""
    allowed = kinds(hint)
    if allowed is None or fits(value, allowed):
        return None
    order = [NUMBER, WHOLE, TEXT, FLAG, NONE]
    words = [k for k in order if k in allowed and not (k == WHOLE and NUMBER in allowed)]
    return f"{name} must be {' or '.join(words)}; got {described(value)}"


def validator(fn: Callable) -> Callable[..., list]:
    """A Gradio validator for `fn`'s endpoint: one verdict per published parameter."""
    params = get_function_params(fn)

    def validate(*values):
        out = [verdict() for _ in params]
        for i, ((name, *_, hint), value) in enumerate(zip(params, values)):
            why = refusal(name, value, hint)
            if why is not None:
                out[i] = gr.validate(False, why)
                break  # one line: the first that does not fit
        return out

    return validate


# A page event's inputs, by component: what its value must be as the browser sends it (null aside).
COMPONENTS = ((gr.Slider, NUMBER), (gr.Number, NUMBER), (gr.Textbox, TEXT), (gr.Checkbox, FLAG))


def component_refusal(fn, data: Any) -> str | None:
    """Why a page event's inputs (called by fn_index) do not fit its components, in one line;
    checked before Gradio's own preprocessing, which would pass a list on or fail on it, and
    whose refusal of a value outside a menu's choices repeats the value whole."""
    for block, value in zip(fn.inputs, data if isinstance(data, list) else []):
        if value is None:
            continue
        name = getattr(block, "label", None) or getattr(block, "elem_id", None) or type(block).__name__
        kind = next((k for cls, k in COMPONENTS if isinstance(block, cls)), None)
        if kind is not None and not fits(value, frozenset([kind])):
            return f"{name} must be {kind}; got {described(value)}"
        if _one_of(block) and not any(
            value == v and isinstance(value, bool) == isinstance(v, bool) for _, v in block.choices
        ):
            return f"{name} must be one of its {len(block.choices)} choices; got {described(value)}"
    return None


def _one_of(block) -> bool:
    """A menu whose value is one of its choices (not a multiselect, no value of one's own)."""
    menu = isinstance(block, gr.Radio) or (
        isinstance(block, gr.Dropdown) and not block.multiselect and not block.allow_custom_value
    )
    return menu and bool(block.choices)


def guard_events(demo: gr.Blocks) -> None:
    """Check every page event's inputs against its components as its request asks to join
    `demo`'s queue (once `demo.queue()` has made it): refused there like a validator's verdict."""
    queue = demo._queue
    join = queue.push

    async def push(body, request, username):
        fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
        why = component_refusal(fn, getattr(body, "data", None)) if fn is not None and fn.preprocess else None
        if why is not None:
            return False, [gr.validate(False, why)], "validator_error"
        return await join(body=body, request=request, username=username)

    queue.push = push


def guard(demo: gr.Blocks) -> int:
    """Give every `gr.api` endpoint of `demo` (its inputs are Gradio's Api placeholders) the
    validator of its declared types; how many it guarded. The MCP server checks a tool's
    arguments against its schema first: its refusals are made as short (`short_schema_refusals`)."""
    short_schema_refusals()
    guarded = 0
    for fn in demo.fns.values():
        if fn.fn is not None and fn.inputs and all(isinstance(c, Api) for c in fn.inputs):
            fn.validator = validator(fn.fn)
            guarded += 1
    return guarded


class _ShortSchema:
    """jsonschema as the MCP server calls it, its refusal naming the argument and what came
    (`described`) instead of repeating the value, which may be megabytes."""

    def __init__(self, jsonschema):
        self.jsonschema, self.ValidationError = jsonschema, jsonschema.ValidationError

    def __getattr__(self, name: str):
        return getattr(self.jsonschema, name)

    def validate(self, instance, schema, *args, **kwargs):
        try:
            self.jsonschema.validate(instance, schema, *args, **kwargs)
        except self.ValidationError as e:
            where = ".".join(str(p) for p in e.absolute_path) or "the arguments"
            wanted = e.validator_value if e.validator == "type" else f"within its schema ({e.validator})"
            raise self.ValidationError(f"{where}: expected {wanted}, got {described(e.instance)}") from None


def short_schema_refusals() -> None:
    """The MCP server's check of a tool's arguments (`mcp.server.lowlevel.server`) refuses in
    one short line; nothing where the MCP package is absent."""
    try:
        from mcp.server.lowlevel import server
    except ImportError:
        return
    if not isinstance(server.jsonschema, _ShortSchema):
        server.jsonschema = _ShortSchema(server.jsonschema)
