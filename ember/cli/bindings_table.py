"""The bindings table and size line ``wrangler deploy`` prints before it uploads (and on
``--dry-run``), so CI logs read the same from ember.

Layout from workers-sdk ``printBindings`` (wrangler 4.164): a title, a ``Binding``/``Resource``
header, one row per binding as ``env.NAME (VALUE)`` padded to the widest such cell, six spaces,
then the resource's friendly name; KV first, then AI, then the assets binding (``Assets``, no
value), then vars. A plain-text var shows its value
in quotes (cut to 40 characters), a JSON var its JSON, a secret or a ``--var`` ``"(hidden)"``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TITLE = "Your Worker has access to the following bindings:"
COLUMN_GAP = " " * 6
MAX_VALUE_CHARS = 40
HIDDEN = '"(hidden)"'


@dataclass(frozen=True, slots=True)
class BindingRow:
    name: str
    resource: str  # wrangler's friendly type name
    value: str | None = None


def binding_rows(
    bindings: Iterable[Mapping[str, Any]], hidden: frozenset[str] = frozenset()
) -> list[BindingRow]:
    """Rows for upload-metadata binding specs, in wrangler's order (KV, AI, assets, vars)."""
    specs = list(bindings)
    rows = [
        BindingRow(b["name"], "KV Namespace", b.get("namespace_id"))
        for b in specs
        if b["type"] in ("kv_namespace", "inherit")
    ]
    rows += [BindingRow(b["name"], "AI") for b in specs if b["type"] == "ai"]
    rows += [BindingRow(b["name"], "Assets") for b in specs if b["type"] == "assets"]
    for b in specs:
        if b["type"] == "plain_text":
            value = HIDDEN if b["name"] in hidden else f'"{_truncate(b["text"])}"'
        elif b["type"] == "json":
            value = _truncate(json.dumps(b["json"], separators=(",", ":")))
        elif b["type"] == "secret_text":
            value = HIDDEN
        else:
            continue
        rows.append(BindingRow(b["name"], "Environment Variable", value))
    return rows


def print_bindings(rows: list[BindingRow], echo: Callable[[str], None]) -> None:
    """The table, or wrangler's "No bindings found." when there are none."""
    if not rows:
        echo("No bindings found.")
        return
    cells = [f"env.{r.name}" + (f" ({r.value})" if r.value else "") for r in rows]
    width = len("env.") + max(len(r.name) for r in rows) + len(" (") + len(")")
    width += max(len(r.value or "") for r in rows)
    echo(TITLE)
    echo(f"{'Binding'.ljust(width)}{COLUMN_GAP}Resource")
    for cell, row in zip(cells, rows, strict=True):
        echo(f"{cell.ljust(width)}{COLUMN_GAP}{row.resource}")
    echo("")


def total_upload_line(modules: Iterable[bytes]) -> str:
    """``Total Upload: X KiB / gzip: Y KiB`` over the module bytes, as wrangler sizes them."""
    data = b"".join(modules)
    return (
        f"Total Upload: {len(data) / 1024:.2f} KiB / "
        f"gzip: {len(gzip.compress(data)) / 1024:.2f} KiB"
    )


def _truncate(text: str) -> str:
    return text if len(text) < MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."
