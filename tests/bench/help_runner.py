"""Run ``python -m bench.NAME --help`` for many NAMEs at the cost of one torch import.

Run as ``python -m tests.bench.help_runner NAME...`` from the repository root: it imports torch
once, then forks one child per NAME that runs the module as ``__main__`` (what ``python -m`` does)
with ``--help``. Each child is a fresh copy of a process that has imported torch and nothing of
bench/, so a module that fails to import, or whose parser breaks, fails exactly as it would on its
own. Prints one JSON object: NAME -> {"returncode", "stdout", "stderr"}.

Why: the bench modules import torch at the top, ~2.5 CPU-seconds each; forty separate processes
spent about a minute and a half of the suite's two cores on importing it again and again.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile
import traceback
from pathlib import Path

import torch  # noqa: F401  (imported once, before the forks, is the point)


def _run_as_main(module: str) -> int:
    """The child's side: what ``python -m bench.MODULE --help`` does, and its exit status."""
    sys.argv = [module, "--help"]
    try:
        runpy.run_module(f"bench.{module}", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)  # sys.exit("message"): the interpreter prints it
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def run_help(module: str, scratch: Path) -> dict[str, object]:
    out, err = scratch / f"{module}.out", scratch / f"{module}.err"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with out.open("wb") as stdout, err.open("wb") as stderr:
                os.dup2(stdout.fileno(), 1)
                os.dup2(stderr.fileno(), 2)
            code = _run_as_main(module)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return {
        "returncode": os.waitstatus_to_exitcode(status),
        "stdout": out.read_text(errors="replace"),
        "stderr": err.read_text(errors="replace"),
    }


def main(modules: list[str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        results = {module: run_help(module, Path(scratch)) for module in modules}
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
