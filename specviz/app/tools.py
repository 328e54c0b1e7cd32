"""The page's tools for programs: API endpoints that Gradio also serves as MCP tools when
the page launches with its MCP server (`app.py`, unless SPECVIZ_MCP=0). Each returns JSON
text, and its docstring (with an Args section) is the tool's description. Bad arguments get
the API's one-line errors (`shown_errors`). The tools are `parts.TOOLS`, by name: the theory's
here, the workshop's beside the code they drive; then `generate_summary`, which runs the models."""

from __future__ import annotations

import functools
import inspect
import json
import math
from dataclasses import asdict

import gradio as gr

from specviz import theory
from specviz.app import parts, runner
from specviz.app.config import PageConfig
from specviz.app.stopping import session_of
from specviz.app.shown_errors import shown_errors
from specviz.errors import UserError, shown
from specviz.lazy import named
from specviz.models.catalogue.sources import check_typed
from specviz.settings import DEFAULTS, check_prompt, from_request


def speedup(alpha: float, k: int, target_ms: float, draft_ms: float) -> str:
    """Predicted speedup of speculative decoding over plain decoding, where a verify pass
    costs one target pass whatever its size: E[tokens per round] * T / (k * D + T), with
    E[tokens per round] = (1 - alpha^(k+1)) / (1 - alpha).

    Args:
        alpha: probability that the target accepts a drafted token, 0 to 1
        k: tokens drafted per round, 0 or more
        target_ms: T, one target forward pass in ms (above 0)
        draft_ms: D, one drafted token in ms (0 or more)

    Returns:
        JSON with speedup and tokens_per_round.
    """
    return json.dumps(
        {
            "speedup": float(theory.speedup(alpha, whole(k, "k"), target_ms, draft_ms)),
            "tokens_per_round": float(theory.tokens_per_round(alpha, whole(k, "k"))),
        }
    )


def best_k(alpha: float, target_ms: float, draft_ms: float, k_max: int = 16) -> str:
    """The draft length with the highest predicted speedup, and the acceptance at which that
    draft length breaks even with plain decoding.

    Args:
        alpha: probability that the target accepts a drafted token, 0 to 1
        target_ms: T, one target forward pass in ms (above 0)
        draft_ms: D, one drafted token in ms (0 or more)
        k_max: the longest draft considered

    Returns:
        JSON with best_k, speedup (at best_k) and break_even_alpha (for best_k; null for k = 0).
    """
    k, s = theory.best_k(alpha, target_ms, draft_ms, k_max=whole(k_max, "k_max"))
    k = int(k)
    even = float(theory.break_even_alpha(k, target_ms, draft_ms)) if k > 0 else None
    return json.dumps({"best_k": k, "speedup": float(s), "break_even_alpha": even})


def generate_api_summary(config: PageConfig):
    def generate_summary(
        prompt: str,
        pair: str = config.default_pair,
        drafter: str = DEFAULTS.drafter,
        temperature: float = DEFAULTS.temperature,
        max_new_tokens: int = 64,
        output_format: str = DEFAULTS.output_format,
        output_spec: str = "",
        request: gr.Request = None,
    ) -> str:
        """Run speculative decoding with the page's defaults (the cost-aware draft length) and
        return what it did.

        Args:
            prompt: the user message
            pair: a model pair preset
            drafter: model, tree, lookup, early-exit, head, suffix or lookahead
            temperature: 0 for greedy, up to 2
            max_new_tokens: tokens to generate
            output_format: text (none), json, regex, choice or grammar: what the answer must be
            output_spec: the JSON schema, regular expression, choices (a JSON list or one a line) or grammar

        Returns:
            JSON with text, summary (tokens, rounds, acceptance, tokens per second, speedup over plain
            decoding, forced tokens, the answer checked against its format, ...) and metrics (vLLM's
            per-request names).
        """
        settings = from_request(
            {
                "drafter": drafter,
                "temperature": temperature,
                "max_new_tokens": max_new_tokens,
                "output_format": output_format,
                "output_spec": output_spec,
            }
        )
        last = None
        for last in runner.stream(pair, check_prompt(prompt), settings, session_of(request), config):
            pass
        if last is None:
            raise UserError("the run produced nothing")
        return json.dumps({"text": last.text, "summary": asdict(last.summary), "metrics": last.metrics})

    return generate_summary


def whole(x, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x != int(x):
        raise UserError(f"{name} must be a whole number (got {shown(x)})")
    return int(x)


def checked_pair(fn, config: PageConfig):
    """`fn` with its `pair` checked as the page checks a pair before a run (`runner.check_pair`):
    a path answers the same whether it exists or not."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = inspect.signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        check_typed(bound.arguments["pair"])
        runner.check_pair(bound.arguments["pair"], config)
        return fn(*bound.args, **bound.kwargs)

    return wrapper


def register(config: PageConfig, models: dict) -> None:
    """Add the tools as documented API endpoints (inside a Blocks context); a tool that takes
    a `pair` has it checked first (`checked_pair`), and one that runs the models waits for their
    slot (`models`)."""
    for name in parts.TOOLS:
        fn = named(name)
        if "pair" in inspect.signature(fn).parameters:
            fn = checked_pair(fn, config)
        slot = models if getattr(fn, "runs_models", False) else {}
        gr.api(shown_errors(fn, html=False), api_name=fn.__name__, **slot)
    gr.api(shown_errors(generate_api_summary(config), html=False), api_name="generate_summary", **models)
