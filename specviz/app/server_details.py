"""What a public page leaves out of everything it shows or hands out: the server's folders and
files, its CPU or GPU model, its library versions and its log lines. A local page keeps them.

`hide_details(public)` is set once as the page is built; until then details are shown (the
command line never hides them). Where each detail comes from, and what stands in for it:

- an error's text: a path is shown as <path> (`redact`);
- a run's trace (the API's stream, a download, the session's state): the run's notes keep what
  the views read and how the run was made, not a cost model's cache key (hardware, versions,
  files) nor any other note (`for_visitors`); a pair named by paths is redacted;
- a runtime's measured rates (the status API): their costs without that key (`plain_costs`);
- an export (a command or code for another engine): a file or folder by its name alone
  (`file_names`);
- the header: no cache folder, no background log's line or path (page.py asks `hidden`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

DETAILS = {"shown": True}
PATH = re.compile(r"(?<![\w:/])(?:~|[A-Za-z]:)?(?:[/\\][\w.+@-]+){2,}[/\\]?")
# The run's notes a visitor's trace keeps: those the views read and those that say how the run
# was made. A cost record keeps its costs and their source, not its notes (`CostModel.meta`).
KEPT_NOTES = (
    "runtime",
    "drafter",
    "cost_model",
    "policy_costs",
    "runtime_costs",
    "vocab",
    "grammar",
    "prompt_tokens",
    "dtype",
    "device",
    "target_loop",
    "stop_ids",
    "record",
)
KEPT_COSTS = ("verify", "draft", "source")


def hide_details(public: bool) -> None:
    DETAILS["shown"] = not public


def hidden() -> bool:
    return not DETAILS["shown"]


def redact(message: str) -> str:
    """`message`, with its paths left out on a public page."""
    return message if DETAILS["shown"] else PATH.sub("<path>", message)


def file_names(text: str) -> str:
    """`text` with each path written as its last part on a public page (a command to copy
    names the file, not where this server keeps it)."""
    if DETAILS["shown"]:
        return text
    return PATH.sub(lambda m: re.split(r"[/\\]", m.group(0).rstrip("/\\"))[-1], text)


def plain_costs(d: Any) -> Any:
    """A cost record (`CostModel.to_dict`) without its notes on a public page."""
    if DETAILS["shown"] or not isinstance(d, dict):
        return d
    return {k: v for k, v in d.items() if k in KEPT_COSTS}


def plain_rates(rates: dict) -> dict:
    """Each runtime's measured rates (`runtime_choice.rates`), their costs as `plain_costs`."""
    return {
        rt: {**r, "cost": plain_costs(r["cost"])} if isinstance(r, dict) and "cost" in r else r
        for rt, r in rates.items()
    }


def for_visitors(trace):
    """`trace` as a public page shows and hands it out (a copy; the run's own is unchanged)."""
    if DETAILS["shown"]:
        return trace
    meta = {k: v for k, v in trace.meta.items() if k in KEPT_NOTES}
    for key in ("cost_model", "policy_costs"):
        if key in meta:
            meta[key] = plain_costs(meta[key])
    if isinstance(meta.get("runtime_costs"), dict):
        meta["runtime_costs"] = {rt: plain_costs(c) for rt, c in meta["runtime_costs"].items()}
    return replace(trace, meta=meta, pair=redact(trace.pair))
