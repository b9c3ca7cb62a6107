"""The bench/ commands BENCHMARKS.md, README.md and docs/*.md quote still parse their flags.

Each quoted `python -m bench.NAME ...` or `python bench/NAME.py ...` names a module whose
`--help` must exit 0 and list every `--flag` the quote passes. Only `--help` runs: no benchmark.
One process (help_runner.py) imports torch once and forks a `python -m bench.NAME --help` for each.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# README.md and the docs/ pages it links to (operator material and details moved there).
DOCS = (
    "BENCHMARKS.md",
    "README.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
)
COMMAND = re.compile(
    r"(?:-m\s+bench\.(\w+)|python\S*\s+bench/(\w+)\.py)((?:\s+[^\s`#;|>→]+)*)",
)


def documented_flags(text: str) -> dict[str, set[str]]:
    """Module name -> the flags the document passes it (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", text)
    pieces = re.findall(r"`([^`]*)`", text) + text.splitlines()
    flags: dict[str, set[str]] = {}
    for piece in pieces:
        for match in COMMAND.finditer(piece):
            module = match.group(1) or match.group(2)
            found = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", match.group(3))
            flags.setdefault(module, set()).update(found)
    return flags


def _all_documented() -> dict[str, set[str]]:
    merged: dict[str, set[str]] = {}
    for name in DOCS:
        for module, flags in documented_flags((ROOT / name).read_text()).items():
            merged.setdefault(module, set()).update(flags)
    return merged


DOCUMENTED = _all_documented()


def test_documented_flags_reads_both_spellings() -> None:
    text = (
        "`PYTHONPATH=. python -m bench.runtime --rounds 6 --cold 3 \\\n"
        "    --output x.json` and\n    python bench/sandbox.py --n 40   # --ignored\n"
    )
    assert documented_flags(text) == {
        "runtime": {"--rounds", "--cold", "--output"},
        "sandbox": {"--n"},
    }
    assert "engine_decode" in DOCUMENTED and "serving" in DOCUMENTED
    # docs/ holds what README moved out: its quotes are read too.
    assert {"docs/serve.md", "docs/models.md"} <= set(DOCS)
    assert "checkpoint_quality" in documented_flags((ROOT / "docs/models.md").read_text())


@pytest.fixture(scope="module")
def helps() -> dict[str, dict[str, object]]:
    """Module name -> the returncode, stdout and stderr of its ``--help``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runner = subprocess.run(
        [sys.executable, "-m", "tests.bench.help_runner", *sorted(DOCUMENTED)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert runner.returncode == 0, runner.stderr[-2000:]
    return json.loads(runner.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_documented_bench_command_parses(module: str, helps: dict[str, dict[str, str]]) -> None:
    result = helps[module]
    assert result["returncode"] == 0, result["stderr"][-2000:]
    assert "usage" in result["stdout"].lower(), result["stdout"][-2000:]
    missing = sorted(f for f in DOCUMENTED[module] if not re.search(rf"{f}\b", result["stdout"]))
    assert missing == [], f"bench.{module} --help lacks {missing}"
