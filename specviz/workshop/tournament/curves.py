"""The pass costs a tournament prices its rounds with: this machine's, and other machines'.

Each curve is a `cost_model.CostModel` (V(n) and D) with where it came from:

- MEASURED_HERE: the loaded pair's costs as this process measured them (`costs.measure.for_pair`),
  or a table this project measured on another of its machines (assets/cost_curves.json);
- MEASURED_GPU: a lent GPU's costs as `scripts/gpu_random_costs.py` times them (the pair's
  shapes with random weights; `scripts/gpu_check.sh` runs it), read from its JSON report;
- PUBLISHED: a figure someone else published, with its link.

A curve without a draft model's cost (D None: the source timed none) prices only the drafters
that need no draft model. Every figure priced on another machine's curve is a prediction: this
text's verdicts, that machine's pass costs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specviz.choices import TORCH
from specviz.cost_model import CostModel
from specviz.errors import UserError

STORED = Path(__file__).resolve().parents[3] / "assets" / "cost_curves.json"
MEASURED_HERE, MEASURED_GPU, PUBLISHED = "measured here", "measured on a lent GPU", "published"
THIS_MACHINE = "this machine"


@dataclass(frozen=True)
class Curve:
    name: str
    cost: CostModel  # D is 0 where `has_draft` is False
    source: str  # MEASURED_HERE, MEASURED_GPU or PUBLISHED
    where: str  # what was timed, on what
    link: str = ""
    runtime: str = ""
    has_draft: bool = True

    @property
    def here(self) -> bool:
        return self.name == THIS_MACHINE

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "where": self.where,
            "link": self.link,
            "runtime": self.runtime,
            "verify": {str(n): round(v, 3) for n, v in self.cost.verify.items()},
            "draft": round(self.cost.draft, 3) if self.has_draft else None,
        }


def this_machine(cost: CostModel, runtime: str, machine: str) -> Curve:
    return Curve(THIS_MACHINE, cost, MEASURED_HERE, f"the loaded pair on {machine}, timed at load", runtime=runtime)


def _curve(d: dict) -> Curve:
    draft = d.get("draft")
    verify = {int(n): float(v) for n, v in d["verify"].items()}
    return Curve(
        d["name"],
        CostModel(verify=verify, draft=float(draft or 0.0), source=d["source"]),
        d["source"],
        d["where"],
        d.get("link", ""),
        d.get("runtime", ""),
        has_draft=draft is not None,
    )


def stored(path: Path = STORED) -> list[Curve]:
    """The curves kept with specviz (assets/cost_curves.json)."""
    return [_curve(d) for d in json.loads(path.read_text(encoding="utf-8"))["curves"]]


def from_gpu_report(path: str | Path) -> Curve:
    """A lent GPU's costs from `scripts/gpu_random_costs.py`'s JSON report."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
        verify = {int(n): float(v) for n, v in report["V_ms"].items()}
        draft = float(report["D_ms"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a report of scripts/gpu_random_costs.py ({e})") from None
    where = (
        f"{report.get('device', 'a GPU')}, the bundled pair's shapes with random weights in "
        f"{report.get('dtype', '?')} on the {report.get('runtime', TORCH)} runtime (scripts/gpu_check.sh)"
    )
    name = f"{report.get('device', 'GPU')}, {report.get('runtime', TORCH)}"
    return Curve(name, CostModel(verify=verify, draft=draft, source=MEASURED_GPU), MEASURED_GPU, where, runtime=TORCH)
