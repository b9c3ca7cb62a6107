"""Run a measurement in another checkout of ember: a fresh process importing that tree's code.

A/B benches (``engine_ab``, ``equal_budget_ab``) alternate two trees round by round; each
measurement prints one JSON line last, which is what comes back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_in_tree(tree: Path, code: str, *args: str) -> dict[str, float]:
    """Run ``python -c code *args`` with ``tree`` as the working directory and import path;
    the parsed last line of its output."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
