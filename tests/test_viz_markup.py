"""Every figure escapes what a trace, a metrics payload or a model wrote: markup fed through
each `*_figure` function of specviz.viz (token texts, titles, legend names, runtime names,
labels) comes out with no tag Plotly would render and no hover-template field it would fill.
The figure's dict is walked string by string, so a new place that draws text is checked too."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
from viz_sample import HOSTILE_IMG, hostile_round, sample_rounds

import specviz.viz
from specviz.run_stats import hindsight, position_stats
from specviz.cost_model import CostModel
from specviz.events import DraftToken, EmittedToken, RoundEvent, TreeNode
from specviz.viz.text import plotly_text

LINK = '<a href="https://example.invalid/x">click</a>'
MARKUP = f"{LINK}<b>{HOSTILE_IMG}%{{evil}}"
# What must never reach a figure from the input (the figures' own <br>, <b> and <extra> are theirs).
RAW = ("<a ", "<img", "%{evil}", "</a>")
COST = {"verify": {str(n): 80.0 + 20 * n for n in range(1, 18)}, "draft": 10.0}


def strings(node) -> list[str]:
    """Every string in a figure's dict, keys included."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in strings(k) + strings(v)]
    if isinstance(node, (list, tuple)):
        return [s for v in node for s in strings(v)]
    if isinstance(node, np.ndarray) and node.dtype.kind in "OU":
        return strings(node.tolist())
    return []


def tree_round() -> RoundEvent:
    nodes = [
        TreeNode(parent=-1, token=1, text=MARKUP, depth=1, q=0.7, p=0.9, decision="accepted"),
        TreeNode(parent=-1, token=2, text=MARKUP + "2", depth=1, q=0.2, p=None, decision="unchecked"),
        TreeNode(parent=0, token=3, text=MARKUP + "3", depth=2, q=0.6, p=0.1, decision="rejected"),
    ]
    return RoundEvent(
        index=3,
        k=2,
        drafted=[
            DraftToken(1, MARKUP, 0.9, 0.7, 0.5, "accepted"),
            DraftToken(3, MARKUP + "3", 0.1, 0.6, 0.8, "rejected"),
        ],
        emitted=EmittedToken(id=7, text=MARKUP, p=0.4, kind="resampled"),
        positions=[],
        draft_ms=5.0,
        verify_ms=1.0,
        t_end_s=0.1,
        new_tokens=2,
        tree=nodes,
    )


def hostile_rounds() -> list[RoundEvent]:
    rounds = sample_rounds() + [hostile_round()]
    for r in rounds:
        for d in r.drafted:
            d.text = MARKUP
        for p in r.positions:
            for t in p.top:
                t.text = MARKUP + str(t.id)
        if r.emitted is not None:
            r.emitted.text = MARKUP
    return rounds


def lossless_result(rule: str = "exact") -> dict:
    p, q = [0.5, 0.3, 0.2], [0.2, 0.5, 0.3]
    return {
        "p": p,
        "q": q,
        "residual": p,
        "measured": p,
        "std_error": [0.01] * 3,
        "acceptance_rate": 0.7,
        "overlap": 0.7,
        "acceptance_std_error": 0.01,
        "samples": 1000,
        "rule": rule,
        "title": MARKUP,
        "in_practice": MARKUP,
        "temperature": 0.7,
        "target": p,
        "draft": q,
        "expected": p,
        "tv": 0.01,
        "tv_std_error": 0.001,
        "tv_expected": 0.0,
        "tv_noise": 0.01,
        "max_z": 1.0,
        "within_noise": True,
    }


def cases():
    """(function name, call) for every figure function: each gets markup wherever it takes text."""
    from specviz.viz import acceptance_plots as ap
    from specviz.viz import lossless_plots as lp
    from specviz.viz import tree_payoff

    rounds = hostile_rounds()
    tree_rounds = [tree_round() for _ in range(3)]
    payoff = tree_payoff.tree_payoff(tree_rounds, {"tree_nodes": 3}, {"cost_model": COST})
    return {
        "position_rates_figure": lambda: ap.position_rates_figure(rounds, title=MARKUP),
        "position_stats_figure": lambda: ap.position_stats_figure(position_stats(rounds), MARKUP),
        "lengths_figure": lambda: ap.lengths_figure(rounds, title=MARKUP),
        "grammar_positions_figure": lambda: ap.grammar_positions_figure([0.5, 1.0], [0.25], title=MARKUP),
        "hindsight_figure": lambda: ap.hindsight_figure(hindsight(rounds, COST), title=MARKUP),
        "temperature_sweep_figure": lambda: ap.temperature_sweep_figure(
            [0, 1], [0.5, 0.4], [2, 1.5], [1.2, 1.1], title=MARKUP
        ),
        "batching_figure": lambda: ap.batching_figure([1, 2], [1.5, 0.9], [1.6, 1.0], [4, 0], 4, 2, title=MARKUP),
        "batch_costs_figure": lambda: ap.batch_costs_figure([1, 2], [1, 2], [[10.0, 12.0], [11.0, 15.0]], title=MARKUP),
        "position_bars_figure": lambda: specviz.viz.position_bars_figure(rounds[0], 1, title=MARKUP),
        "lossless_frequencies_figure": lambda: lp.lossless_frequencies_figure(
            lossless_result(), [MARKUP] * 3, title=MARKUP
        ),
        "lossless_acceptance_figure": lambda: lp.lossless_acceptance_figure(lossless_result(), title=MARKUP),
        "bug_frequencies_figure": lambda: lp.bug_frequencies_figure(
            {MARKUP: lossless_result(MARKUP)}, [MARKUP] * 3, title=MARKUP
        ),
        "bug_tv_figure": lambda: lp.bug_tv_figure({MARKUP: lossless_result(MARKUP)}, title=MARKUP),
        "style_figure": lambda: specviz.viz.style_figure(specviz.viz.empty_figure(MARKUP), MARKUP),
        "empty_figure": lambda: specviz.viz.empty_figure(MARKUP, MARKUP),
        "pass_cost_figure": lambda: specviz.viz.pass_cost_figure(
            {MARKUP: CostModel(verify={1: 10, 4: 20}, draft=2)}, MARKUP
        ),
        "tokens_vs_time_figure": lambda: specviz.viz.tokens_vs_time_figure(rounds, None, title=MARKUP),
        "tokens_per_round_figure": lambda: specviz.viz.tokens_per_round_figure(title=MARKUP),
        "speedup_vs_k_figure": lambda: specviz.viz.speedup_vs_k_figure(40.0, 4.0, title=MARKUP),
        "speedup_heatmap_figure": lambda: specviz.viz.speedup_heatmap_figure(40.0, 4.0, title=MARKUP),
        "round_timeline_figure": lambda: specviz.viz.round_timeline_figure(rounds, title=MARKUP),
        "tree_figure": lambda: _tree().tree_figure(tree_round()),
        "tree_mask_figure": lambda: _tree().tree_mask_figure(tree_round()),
        "payoff_figure": lambda: tree_payoff.payoff_figure(payoff, title=MARKUP),
    }


def _tree():
    from specviz.viz import tree

    return tree


def figure_functions() -> set[str]:
    """Every public `*_figure` function defined in specviz.viz."""
    found = set()
    for info in pkgutil.iter_modules(specviz.viz.__path__):
        module = importlib.import_module(f"specviz.viz.{info.name}")
        found |= {
            name
            for name, fn in inspect.getmembers(module, inspect.isfunction)
            if name.endswith("_figure") and not name.startswith("_") and fn.__module__ == module.__name__
        }
    return found


def test_every_figure_function_is_fed_markup():
    assert figure_functions() == set(cases())


@pytest.mark.parametrize("name", sorted(cases()))
def test_no_markup_reaches_a_figure_unescaped(name):
    fig = cases()[name]()
    texts = strings(fig.to_plotly_json())
    leaked = [s for s in texts if any(r in s for r in RAW)]
    assert not leaked, leaked[:3]
    # The markup is there, escaped: shown as typed, not dropped.
    assert any("&lt;a href=" in s for s in texts), name


def test_the_helper_escapes_tags_entities_and_template_fields():
    assert plotly_text(LINK) == '&lt;a href="https://example.invalid/x"&gt;click&lt;/a&gt;'
    assert plotly_text("a & b %{y}") == "a &amp; b %&#123;y}"
    assert plotly_text("line\nbreak") == "line\\nbreak"
