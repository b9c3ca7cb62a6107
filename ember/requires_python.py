"""A project's ``requires-python`` against the interpreter that runs its workers.

Cloudflare's Python Workers run Python 3.12 or newer (Pyodide); ember runs workers on the
interpreter it is installed in, which may be older. A project that says which Pythons it is
written for, and excludes this one, gets one warning at start naming both.

``allows`` reads PEP 440 specifiers as far as Python versions go: release numbers, ``.*``
prefixes on ``==`` / ``!=``, and ``~=``. ``packaging`` reads them all, but it is not one of
ember's dependencies; the tests compare the two on random specifiers.
"""

from __future__ import annotations

import re
import sys

_CLAUSE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$")
# What fails on an older interpreter, by the version that brought it: the Python the platform
# runs (3.12) is the one that matters; a few common examples, not a list of changes.
NEWER_FEATURES = {
    (3, 12): "PEP 695 `type` statements and `def f[T]()` generics, f-strings that reuse their "
    "quotes, itertools.batched",
}


def allows(spec: str, version: tuple[int, ...]) -> bool:
    """Whether ``version`` (a release: ``(3, 11, 7)``) satisfies every clause of ``spec``;
    ValueError for a clause this does not read."""
    clauses = spec.split(",")
    if not spec.strip():
        raise ValueError("an empty specifier")
    return all(_clause_allows(clause, version) for clause in clauses)


def _clause_allows(clause: str, version: tuple[int, ...]) -> bool:
    match = _CLAUSE.match(clause)
    if match is None:
        raise ValueError(f"cannot read version specifier {clause.strip()!r}")
    op, text, star = match.groups()
    wanted = tuple(int(part) for part in text.split("."))
    if star and op not in ("==", "!="):
        raise ValueError(f"'.*' only follows == or != ({clause.strip()!r})")
    if op == "===":
        return ".".join(map(str, version)) == text
    if op == "~=":
        if len(wanted) < 2:
            raise ValueError(f"~= needs at least two release numbers ({clause.strip()!r})")
        return _cmp(version, wanted) >= 0 and _prefix(version, wanted[:-1])
    if op in ("==", "!="):
        equal = _prefix(version, wanted) if star else _cmp(version, wanted) == 0
        return equal if op == "==" else not equal
    order = _cmp(version, wanted)
    return {"<": order < 0, "<=": order <= 0, ">": order > 0, ">=": order >= 0}[op]


def _cmp(left: tuple[int, ...], right: tuple[int, ...]) -> int:
    """PEP 440's release comparison: the shorter one padded with zeros."""
    width = max(len(left), len(right))
    a = left + (0,) * (width - len(left))
    b = right + (0,) * (width - len(right))
    return (a > b) - (a < b)


def _prefix(version: tuple[int, ...], prefix: tuple[int, ...]) -> bool:
    padded = version + (0,) * max(0, len(prefix) - len(version))
    return padded[: len(prefix)] == prefix


def python_mismatch(
    requires: str | None, version: tuple[int, ...] | None = None, where: str = "pyproject.toml"
) -> str | None:
    """The warning for a project whose ``requires-python`` excludes ``version`` (this
    interpreter's by default), or None: none set, one this cannot read, or one it allows."""
    version = version or tuple(sys.version_info[:3])
    if not requires:
        return None
    try:
        if allows(requires, version):
            return None
    except ValueError:
        return None
    running = ".".join(map(str, version))
    newer = [what for since, what in NEWER_FEATURES.items() if version[:2] < since]
    breaks = f": code for a newer Python may fail here ({'; '.join(newer)})" if newer else ""
    return (
        f"{where}: requires-python {requires!r} excludes Python {running}, the interpreter "
        f"ember runs workers on (Cloudflare's Python Workers run 3.12 or newer){breaks}. "
        f"Install ember into a Python the project allows."
    )
