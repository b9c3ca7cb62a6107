"""The config snippet `ember kv namespace create` prints, as `wrangler kv namespace create` does.

wrangler names the binding after the title (characters that cannot be in an identifier become
``_``) and writes the snippet in the format of the project's config file: TOML for
``wrangler.toml``, JSON otherwise. ember adds YAML for ``ember.yaml``, its own format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ember.config import CONFIG_FILES

INTRO = (
    "To access your new KV Namespace in your Worker, "
    "add the following snippet to your configuration file:"
)


def binding_name(title: str) -> str:
    """wrangler's binding for a new namespace: the title with non-word characters as ``_``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", title)
    return f"_{name}" if name[:1].isdigit() else name


def config_snippet(title: str, namespace_id: str, project_dir: Path) -> str:
    """The ``kv_namespaces`` entry for the config file found in ``project_dir`` (JSON if none)."""
    binding = binding_name(title)
    found = next((name for name in CONFIG_FILES if (project_dir / name).is_file()), None)
    if found == "wrangler.toml":
        return f'[[kv_namespaces]]\nbinding = "{binding}"\nid = "{namespace_id}"'
    if found in ("ember.yaml", "ember.yml"):
        return f"kv_namespaces:\n  - binding: {binding}\n    id: {namespace_id}"
    entry = {"kv_namespaces": [{"binding": binding, "id": namespace_id}]}
    return json.dumps(entry, indent=2)
