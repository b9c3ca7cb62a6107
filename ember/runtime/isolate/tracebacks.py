"""Tracebacks as the user should see them: their frames (file:line), not ember's machinery."""

from __future__ import annotations

import traceback
from pathlib import Path

import ember

_EMBER_DIR = str(Path(ember.__file__).resolve().parent)


def format_user_traceback(exc: BaseException, limit_chars: int = 32_000) -> str:
    """The exception with frames inside the ``ember`` package removed (chains included)."""
    report = traceback.TracebackException.from_exception(exc, capture_locals=False)
    _strip(report, set())
    text = "".join(report.format())
    if len(text) > limit_chars:
        text = (
            text[: limit_chars // 2]
            + "\n... (traceback truncated) ...\n"
            + text[-limit_chars // 2 :]
        )
    return text


def _hidden(filename: str) -> bool:
    return filename.startswith(_EMBER_DIR) or filename.startswith("<frozen importlib")


def _strip(report: traceback.TracebackException, seen: set[int]) -> None:
    if id(report) in seen:
        return
    seen.add(id(report))
    frames = [f for f in report.stack if not _hidden(f.filename or "")]
    report.stack = traceback.StackSummary.from_list(frames)
    for chained in (report.__cause__, report.__context__):
        if chained is not None:
            _strip(chained, seen)
