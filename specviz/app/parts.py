"""What the page is made of, by name: its tabs in order, the panels other modules add to a tab,
and its tools for programs. Each is named "module:attr" and imported as the page is built
(`lazy.named`), as `choices` names the drafters: the page names the workshop's tabs, panels and
tools here without importing the workshop, whose modules hold them beside the code they show
(docs/ARCHITECTURE.md, "The page is a list of tabs").
"""

from __future__ import annotations

# The tabs, in the page's order: `Tab` subclasses (app/tab.py).
TABS = (
    "specviz.app.live:LivePage",
    "specviz.app.inspector:InspectorPage",
    "specviz.app.compare:ComparePage",
    "specviz.app.theory_tab:TheoryPage",
    "specviz.workshop.lossless_tab:LosslessPage",
    "specviz.app.labs_tab:LabsPage",
    "specviz.app.traces:TracesPage",
)

# The panels added to a tab, by the tab's id, in order after the tab's own sections: `Panel`
# subclasses (app/tab.py).
PANELS = {
    "live": ("specviz.workshop.production.panels:ExportSettings",),
    "labs": ("specviz.workshop.labs.panels:PairLabs", "specviz.workshop.production.panels:ProductionMetrics"),
}

# The tools for programs, in order: functions returning JSON text, served as API endpoints and
# MCP tools under their own names (app/tools.py), after the page's `generate`.
TOOLS = (
    "specviz.app.tools:speedup",
    "specviz.app.tools:best_k",
    "specviz.workshop.lossless_tab:lossless_check",
    "specviz.workshop.production.panels:export_settings",
    "specviz.workshop.production.panels:read_metrics",
)
