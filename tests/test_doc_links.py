"""Relative links between README.md and docs/*.md resolve: the file exists and, for a
`#anchor` into a Markdown file, a heading of that file makes that anchor (GitHub's rule)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks (a `[x](y)` or `# x` in code is not Markdown)."""
    out, in_block = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        out.append("" if in_block else line)
    return "\n".join(out)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped,
    spaces to `-`."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(path.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            found.add(anchor(match.group(1)))
    return found


def broken_links(path: Path) -> list[str]:
    out = []
    for target in LINK.findall(prose(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not ours to check
        file, _, fragment = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(ROOT)}: ({target})"
        if not dest.exists():
            out.append(f"{where}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            out.append(f"{where}: {dest.name} has no heading #{fragment}")
    return out


def test_the_docs_link_to_each_other() -> None:
    # The check below must see the links README and docs/ make, not pass on an empty parse.
    readme = LINK.findall(prose((ROOT / "README.md").read_text()))
    assert any(t.startswith("docs/serve.md") for t in readme)
    assert any(t.startswith("docs/workers.md#") for t in readme)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_a_broken_file_or_anchor_is_reported(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## `ember serve`: limits\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/a.md#ember-serve-limits) [gone](docs/b.md) [bad](docs/a.md#limits)\n"
        "```\n[in code](nowhere.md)\n```\n[web](https://example.com/x#y)\n"
    )
    assert broken_links(readme) == [
        "README.md: (docs/b.md): no such file",
        "README.md: (docs/a.md#limits): a.md has no heading #limits",
    ]
