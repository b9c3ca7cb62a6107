"""How ``ember versions`` and ``ember deployments status`` print versions and deployments.

The layout is wrangler's (workers-sdk ``src/utils/render-labelled-values.ts`` and the
``versions list|view`` and ``deployments status`` commands, whose tests pin the exact text), so a
script that reads ``Version ID:`` or ``(30%) <id>`` from wrangler reads ember the same way.
"""

from __future__ import annotations

import re
from typing import Any

BLANK = "-"  # an unset tag or message
TRIGGERS = {
    "upload": "Upload",
    "secret": "Secret Change",
    "rollback": "Rollback",
    "promotion": "Promotion",
    # Cloudflare's tags for POST .../deployments and .../versions, which wrangler 4.164 still
    # prints as "Unknown (deployment)" / "Unknown (version_upload)".
    "deployment": "Deployment",
    "version_upload": "Version Upload",
}
SOURCES = {
    "api": "API 📡",
    "dash": "Dashboard 🖥️",
    "wrangler": "Wrangler 🤠",
    "terraform": "Terraform 🏗️",
    "ember": "ember",
}


def labelled(values: dict[str, str], *, indent: int = 0, right: bool = False) -> str:
    """``Label:  value`` lines with the values in one column; a multi-line value's later lines
    are indented to that column. ``right`` right-justifies the labels."""
    width = max(len(label) + 1 for label in values)
    lines = []
    for label, value in values.items():
        head = f"{label}:"
        pad = " " * (width - len(head)) if right else ""
        first, *rest = value.split("\n")
        lines.append(" " * indent + pad + head + " " * (width + 2 - len(pad + head)) + first)
        lines += [" " * (width + 2 + indent) + line for line in rest]
    return re.sub(r"(?m)^[ \t]+$", "", "\n".join(lines))


def source_label(source: str, annotations: dict[str, Any] | None) -> str:
    """What made a version or deployment: its trigger if recorded, else the client."""
    trigger = (annotations or {}).get("workers/triggered_by")
    if trigger is None:
        return SOURCES.get(source, f"Other ({source})")
    return TRIGGERS.get(trigger, f"Unknown ({trigger})")


def percent(value: float) -> str:
    """A percentage as JavaScript prints a number: ``30``, ``33.5``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def version_summary(version: dict[str, Any]) -> dict[str, str]:
    annotations = version.get("annotations") or {}
    metadata = version["metadata"]
    return {
        "Version ID": version["id"],
        "Created": metadata["created_on"],
        "Author": metadata.get("author_email") or BLANK,
        "Source": source_label(metadata.get("source", ""), annotations),
        "Tag": annotations.get("workers/tag") or BLANK,
        "Message": annotations.get("workers/message") or BLANK,
    }


def traffic(deployment: dict[str, Any], versions: dict[str, dict[str, Any]]) -> str:
    """A deployment's versions: ``(30%) <id>`` and the version's created/tag/message."""
    blocks = []
    for target in deployment["versions"]:
        version = versions[target["version_id"]]
        annotations = version.get("annotations") or {}
        details = labelled(
            {
                "Created": version["metadata"]["created_on"],
                "Tag": annotations.get("workers/tag") or BLANK,
                "Message": annotations.get("workers/message") or BLANK,
            },
            indent=4,
            right=True,
        )
        blocks.append(f"({percent(target['percentage'])}%) {version['id']}\n{details}")
    return "\n\n".join(blocks)


def deployment_summary(deployment: dict[str, Any], versions: dict[str, dict[str, Any]]) -> str:
    annotations = deployment.get("annotations") or {}
    return labelled(
        {
            "Created": deployment["created_on"],
            "Author": deployment.get("author_email") or BLANK,
            "Source": source_label(deployment.get("source", ""), annotations),
            "Message": annotations.get("workers/message") or BLANK,
            "Version(s)": traffic(deployment, versions),
        }
    )
