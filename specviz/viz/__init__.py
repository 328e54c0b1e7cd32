"""Drawing: functions from events (and summaries) to Plotly figures and HTML strings.

No torch and no gradio here: everything takes the plain data of specviz.events, so a saved
trace draws exactly like a live run. HTML output uses the classes styled in
assets/specviz.css; every piece of model or user text in it is escaped.

    tokens.py         the coloured token stream and its legend
    live_stats.py     the numbers beside a running generation
    timeline.py       draft / verify time and tokens gained per round
    inspector.py      one round in words; p vs q at one position
    acceptance_plots.py the labs: acceptance by position, accepted lengths, hindsight k,
                      the temperature sweep and batching (from specviz.run_stats / labs)
    race.py           speculative against plain: replay, tokens over time, identity check
    theory_plots.py   tokens per round and speedup against k and alpha
    prediction.py     predicted against measured, and why they differ
    lossless_plots.py the Monte Carlo lab
    pass_cost.py      V(n) by runtime, in one-token passes
    pair_status.py    the page's header: the pair's load, precision, runtime and its rates
    tree.py           a token-tree round as a figure
    tree_payoff.py    what a tree of a given size pays against a chain
    source.py         where a suffix or lookahead round's candidates came from
    speculation_note.py why a run that stood aside or fell short of plain went so, in pass costs
    policy_words.py   why the cost-aware policy drafted nothing in a round, in words
    text.py           escaping and token text; the HTML of plain sentences and tables
    palette.py        colours, the shared figure style and axes
"""

from specviz.viz.inspector import position_bars_figure, position_choices, round_narrative_html, round_story
from specviz.viz.live_stats import LiveStats, live_stats, stats_html
from specviz.viz.lossless_plots import lossless_acceptance_figure, lossless_frequencies_figure, lossless_summary_html
from specviz.viz.palette import empty_figure, style_figure
from specviz.viz.pass_cost import pass_cost_figure, runtime_curves
from specviz.viz.prediction import Prediction, gap_explanation, predict, prediction_html
from specviz.viz.race import (
    REPLAY_FRAME_S,
    comparison_html,
    identity_check,
    identity_html,
    race_end_s,
    race_frame,
    replay_times,
    tokens_vs_time_figure,
)
from specviz.viz.policy_words import why_plain
from specviz.viz.speculation_note import speculation_note_html
from specviz.viz.theory_plots import (
    speedup_heatmap_figure,
    speedup_vs_k_figure,
    theory_text_html,
    tokens_per_round_figure,
)
from specviz.viz.timeline import round_timeline_figure
from specviz.viz.tokens import legend_html, tokens_html

__all__ = [
    "LiveStats",
    "Prediction",
    "REPLAY_FRAME_S",
    "comparison_html",
    "empty_figure",
    "gap_explanation",
    "identity_check",
    "identity_html",
    "legend_html",
    "live_stats",
    "pass_cost_figure",
    "runtime_curves",
    "lossless_acceptance_figure",
    "lossless_frequencies_figure",
    "lossless_summary_html",
    "position_bars_figure",
    "position_choices",
    "predict",
    "prediction_html",
    "race_end_s",
    "race_frame",
    "replay_times",
    "round_narrative_html",
    "round_story",
    "round_timeline_figure",
    "speedup_heatmap_figure",
    "speedup_vs_k_figure",
    "speculation_note_html",
    "why_plain",
    "stats_html",
    "style_figure",
    "theory_text_html",
    "tokens_html",
    "tokens_per_round_figure",
    "tokens_vs_time_figure",
]
