"""A worker project with static assets, as the asset tests of ``ember dev`` and ``ember serve``
build it: ``src/entry.py``, the files under ``public/``, and a ``wrangler.jsonc`` that names them
as its assets (binding ``ASSETS``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

CONFIG = {
    "name": "site",
    "main": "src/entry.py",
    "compatibility_date": "2025-06-01",
    "compatibility_flags": ["python_workers"],
    "assets": {"directory": "./public", "binding": "ASSETS"},
}


def asset_project(
    root: Path, entry: str, public: Mapping[str, str | bytes], config: Mapping = CONFIG
) -> Path:
    """``root`` as such a project; ``public`` maps paths under ``public/`` to their content."""
    (root / "src").mkdir(parents=True)
    (root / "public").mkdir(parents=True)
    (root / "src" / "entry.py").write_text(entry)
    for name, content in public.items():
        path = root / "public" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    (root / "wrangler.jsonc").write_text(json.dumps(dict(config)))
    return root
