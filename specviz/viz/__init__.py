"""Drawing: functions from events (and summaries) to Plotly figures and HTML strings.

No torch and no gradio here: everything takes the plain data of specviz.events, so a saved
trace draws exactly like a live run. HTML output uses the classes styled in
assets/specviz.css; every piece of model or user text in it is escaped.
"""

from specviz.viz.live_stats import LiveStats, live_stats, stats_html
from specviz.viz.palette import style_figure
from specviz.viz.stats_plots import acceptance_by_position_figure, accepted_length_figure, speedup_comparison_figure
from specviz.viz.timeline import round_timeline_figure
from specviz.viz.tokens import legend_html, tokens_html

__all__ = [
    "LiveStats",
    "acceptance_by_position_figure",
    "accepted_length_figure",
    "legend_html",
    "live_stats",
    "round_timeline_figure",
    "speedup_comparison_figure",
    "stats_html",
    "style_figure",
    "tokens_html",
]
