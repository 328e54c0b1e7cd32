"""Continue a bench run that stopped before its last prompt (`--resume`).

A full run on a slow machine takes hours. Its bench.json is rewritten after every prompt, with
each run's tokens, so a later process can keep the prompts already finished and run only the
rest. That is fair only when everything that sets the figures is unchanged: the pair, the
machine, the libraries, specviz's own code, the generation settings and the methods.
Anything else is refused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from specviz.workshop.bench.harness import Raw
from specviz.workshop.bench.methods import Method, Sample
from specviz.workshop.bench.prompts import BenchPrompt
from specviz.errors import UserError

# meta fields of bench.json that must be the same in both processes
SAME = (
    "pair",
    "device",
    "dtype",
    "draft_precision",
    "machine",
    "torch",
    "transformers",
    "code",
    "max_new_tokens",
    "temperature",
    "repeats",
    "k_max",
    "seed",
)


def code_digest() -> str:
    """A digest of specviz's Python source, so a run is not resumed with a changed engine."""
    root = Path(__file__).resolve().parents[2]  # specviz/
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def adopt_costs(pair, earlier: dict[str, Any]) -> None:
    """Price the resumed runs with the earlier process's cost model, when it was measured for
    this pair as loaded now. Adaptive k starts from those costs, and a cached model is scaled
    by a quick timing at every load: taken afresh, a few noisy passes would refuse the resume."""
    from specviz.cost_model import CostModel
    from specviz.costs.measure import key

    old = (earlier.get("meta") or {}).get("cost_model")
    if not old:
        return
    model = CostModel.from_dict(old)
    if model.meta.get("key") != key(pair):
        return  # measured for another load: `finished` refuses the resume and says why
    model.source = "earlier process"
    pair.cost_model = model


def read_earlier(out: Path) -> dict[str, Any] | None:
    """The bench.json in `out`, or None when there is none yet (the run starts afresh)."""
    path = out / "bench.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"cannot resume from {path}: {e}") from None


def finished(earlier: dict[str, Any], meta: dict[str, Any], methods: list[Method], prompts: list[BenchPrompt]) -> Raw:
    """The earlier run's samples for the prompts of `prompts` it finished, once it is sure
    they were measured as this run would measure them."""
    old = earlier.get("meta", {})
    for key in SAME:
        if old.get(key) != meta.get(key):
            raise UserError(
                f"cannot resume: {key} was {old.get(key)!r} in the earlier run and is {meta.get(key)!r} now; "
                "use another --out, or the earlier settings"
            )
    models = [m.get("cost_model") or {} for m in (old, meta)]
    then, now = [(m.get("verify"), m.get("draft")) for m in models]
    if then != now:
        was, is_ = [(m.get("meta") or {}).get("key") or {} for m in models]
        differ = [f"{k} {was.get(k)!r} then, {is_.get(k)!r} now" for k in sorted(was | is_) if was.get(k) != is_.get(k)]
        detail = f" ({', '.join(differ)})" if differ else ""
        raise UserError(
            f"cannot resume: the pair's pass costs were measured for another load of it{detail}, "
            "and adaptive k starts from them"
        )
    names = [m.get("name") for m in earlier.get("methods", [])]
    if names != [m.name for m in methods]:
        raise UserError(
            f"cannot resume: the earlier run's methods were {','.join(map(str, names))}; give the same --methods"
        )
    chars = {p["id"]: p.get("chars") for p in earlier.get("prompts", [])}
    raw: Raw = {}
    for p in prompts:
        runs = earlier.get("samples", {}).get(p.id)
        if runs is None:
            continue
        if chars.get(p.id) != p.chars:
            raise UserError(f"cannot resume: prompt {p.id!r} has changed since the earlier run")
        try:
            raw[p.id] = {m.name: [Sample.from_record(s) for s in runs[m.name]] for m in methods}
        except (KeyError, TypeError, ValueError):
            raise UserError(
                "cannot resume: the earlier bench.json lacks the runs' tokens (written by an older specviz)"
            ) from None
    return raw
