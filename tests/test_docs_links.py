"""Every relative link in README.md and docs/*.md resolves: the file (or folder) it names
exists, and an #anchor into one of our markdown files names one of its headings, as GitHub
spells them. Links inside code blocks and to other sites are not checked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """`text` without its fenced code blocks and inline code."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path: Path) -> set[str]:
    """The #anchors GitHub gives the headings of a markdown file: lower case, inline markup and
    punctuation dropped, spaces as hyphens, a repeated one numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for line in re.sub(r"^```.*?^```[^\n]*$", "", path.read_text(), flags=re.M | re.S).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken(path: Path) -> list[str]:
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    wrong = []
    for target in LINK.findall(prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if not where.exists():
            wrong.append(f"{shown}: {target} (no such file)")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            wrong.append(f"{shown}: {target} (no such heading in {where.name})")
    return wrong


def test_every_relative_link_in_the_readme_and_docs_resolves():
    wrong = [w for path in DOCS for w in broken(path)]
    assert not wrong, "\n".join(wrong)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## Two runtimes on one CPU (2-core) `x`\n\n## Again\n\n## Again\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#two-runtimes-on-one-cpu-2-core-x) [b](other.md#again-1) [c](#here) ![d](missing.png)\n"
        "[e](other.md#nowhere) [f](https://example.com/x.md) `[g](nope.md)`\n\n## Here\n\n```\n[h](gone.md)\n```\n"
    )
    assert broken(page) == [
        f"{page}: missing.png (no such file)",
        f"{page}: other.md#nowhere (no such heading in other.md)",
    ]
