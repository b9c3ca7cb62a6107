"""Tracebacks as the user should see them: their frames (file:line), not ember's machinery.

Frames inside the ``ember`` package are dropped. Its install path can still appear in a message
(Python writes ``cannot import name 'X' from 'workers' (FILE)``): it is the platform's business,
not the worker's (whose own files are ``/app/...`` on ``ember serve``), so the modules the
isolate provides (``workers``, ``js``, ``pyodide``...) are named ``/lib/python/workers/...``,
as a Python Workers traceback names Pyodide's own files under ``/lib``, and ember's other
modules ``/lib/python/ember/...``.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import ember

_EMBER_DIR = str(Path(ember.__file__).resolve().parent)
# The unresolved spelling too: module files carry the path they were imported by.
_EMBER_DIRS = tuple(dict.fromkeys((_EMBER_DIR, str(Path(ember.__file__).parent))))
NEUTRAL_DIR = "/lib/python"
# With the trailing "/": a sibling of the package whose name starts with "ember" (a user's
# ``ember_site/``, next to an editable checkout) is the user's, neither renamed nor hidden.
_EMBER_PREFIXES = tuple(f"{base}/" for base in _EMBER_DIRS)
_REWRITES = tuple(
    (prefix, replacement)
    for base in _EMBER_DIRS
    for prefix, replacement in (
        (f"{base}/runtime/isolate_path/", f"{NEUTRAL_DIR}/"),
        (f"{base}/", f"{NEUTRAL_DIR}/ember/"),
    )
)


def neutral_paths(text: str) -> str:
    """``text`` with ember's install path replaced by its neutral name."""
    for prefix, replacement in _REWRITES:
        if prefix in text:
            text = text.replace(prefix, replacement)
    return text


def user_message(exc: BaseException) -> str:
    """``Type: message`` for the worker's author (a TypeError subclass of ember's own is named
    by the public class it derives from; paths neutral)."""
    kind = type(exc)
    while (
        kind.__name__.startswith("_")
        and kind.__module__.startswith("ember.")
        and kind.__base__ not in (None, object)
    ):
        kind = kind.__base__
    return neutral_paths(f"{kind.__name__}: {exc}")


def format_user_traceback(exc: BaseException, limit_chars: int = 32_000) -> str:
    """The exception with frames inside the ``ember`` package removed (chains included)."""
    report = traceback.TracebackException.from_exception(exc, capture_locals=False)
    _strip(report, set())
    text = neutral_paths("".join(report.format()))
    if len(text) > limit_chars:
        text = (
            text[: limit_chars // 2]
            + "\n... (traceback truncated) ...\n"
            + text[-limit_chars // 2 :]
        )
    return text


def _hidden(filename: str) -> bool:
    return filename.startswith(_EMBER_PREFIXES) or filename.startswith("<frozen importlib")


def _strip(report: traceback.TracebackException, seen: set[int]) -> None:
    if id(report) in seen:
        return
    seen.add(id(report))
    frames = [f for f in report.stack if not _hidden(f.filename or "")]
    report.stack = traceback.StackSummary.from_list(frames)
    for chained in (report.__cause__, report.__context__):
        if chained is not None:
            _strip(chained, seen)
