"""The bench's prompt set: a JSON file `{"prompts": [{"id", "kind", "prompt"}, ...]}` (or a
bare list), or JSON Lines with one such object a line. In place of "prompt" an item may give
"messages", a conversation as a list of {"role", "content"} ending with the user's turn (the
chat template renders it, earlier answers included). An item may also give "output_format"
and "output_spec" (the settings of those names: a JSON schema, a regular expression, ...), which
every method of the run then decodes under (the `json` group)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specviz.choices import FREE_TEXT
from specviz.errors import UserError
from specviz.grammar.formats import OutputFormat, parse
from specviz.settings import check_prompt

DEFAULT_PROMPTS = Path(__file__).resolve().parents[3] / "assets" / "bench_prompts.json"
KINDS = ("code", "prose", "repetitive", "edit", "json")
# The kinds the bench's older goals are measured on; the repetitive group (answers that
# repeat their input, where draft-free methods should win) and the edit group (longer edit
# tasks: answers of 150-400 tokens that return their input with a few changes) are reported apart.
GOAL_KINDS = ("code", "prose")
COPY_KINDS = ("repetitive", "edit")
# Extraction and formatting under a JSON schema: constrained decoding, reported apart.
FORMAT_KINDS = ("json",)


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    kind: str  # one of KINDS
    prompt: str | list[dict]  # the user message, or a conversation (settings.check_prompt)
    output_format: str = FREE_TEXT  # the output format every method decodes this prompt under
    output_spec: str = ""

    @property
    def output(self) -> OutputFormat | None:
        return parse(self.output_format, self.output_spec)

    @property
    def chars(self) -> int:
        return len(self.prompt) if isinstance(self.prompt, str) else sum(len(m["content"]) for m in self.prompt)


def load_prompts(path: str | Path) -> list[BenchPrompt]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot read the prompt file {path}: {e.strerror or e}") from None
    try:
        if path.suffix == ".jsonl":
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
            items = data["prompts"] if isinstance(data, dict) and "prompts" in data else data
    except (ValueError, KeyError) as e:
        raise UserError(f"{path}: not a prompt file ({e})") from None
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: expected a non-empty list of prompts")
    prompts = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or ("prompt" in item) == ("messages" in item):
            raise UserError(f'{path}: prompt {i + 1} needs a "prompt" string or a "messages" list (one of them)')
        try:
            text = check_prompt(item.get("prompt", item.get("messages")))
        except UserError as e:
            raise UserError(f"{path}: prompt {i + 1}: {e}") from None
        kind = item.get("kind", "prose")
        if kind not in KINDS:
            raise UserError(f"{path}: prompt {i + 1} has kind {kind!r}; use one of {', '.join(KINDS)}")
        fmt = item.get("output_format", FREE_TEXT), item.get("output_spec", "")
        try:
            parse(*fmt)
        except UserError as e:
            raise UserError(f"{path}: prompt {i + 1}: {e}") from None
        prompts.append(
            BenchPrompt(
                id=str(item.get("id", f"p{i + 1}")), kind=kind, prompt=text, output_format=fmt[0], output_spec=fmt[1]
            )
        )
    ids = [p.id for p in prompts]
    dupes = sorted({x for x in ids if ids.count(x) > 1})
    if dupes:
        raise UserError(f"{path}: prompt ids must be unique (repeated: {', '.join(dupes)})")
    return prompts


def select(prompts: list[BenchPrompt], *, ids: list[str] | None = None, limit: int | None = None) -> list[BenchPrompt]:
    """The prompts named by `ids` (in file order), or all; then the first `limit`, taken
    alternately from code and prose so a short run still covers both."""
    if ids:
        known = {p.id for p in prompts}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise UserError(f"unknown prompt id(s): {', '.join(unknown)} (the file has: {', '.join(sorted(known))})")
        prompts = [p for p in prompts if p.id in ids]
    if limit is None or limit >= len(prompts):
        return prompts
    chosen = alternating(prompts)[:limit]
    return [p for p in prompts if p in chosen]


def alternating(prompts: list[BenchPrompt]) -> list[BenchPrompt]:
    """The prompts taken in turn from each kind (code, prose, code, ...), each kind in file
    order, until the shorter kind runs out and the longer one finishes."""
    by_kind = [[p for p in prompts if p.kind == k] for k in KINDS]
    return [kind[i] for i in range(max(map(len, by_kind), default=0)) for kind in by_kind if i < len(kind)]
