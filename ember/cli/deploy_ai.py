"""What a deploy tells the author about the project's ``ai.models`` mapping.

``ai.models`` in a project's config maps ids to local checkpoints for ``ember dev``; on a
platform the operator's config decides what ``env.AI`` serves, and a project's mapping is not
sent. A worker that relied on a mapped id then answers 5007 once deployed, with nothing said at
deploy time: say it there, naming the ids the platform does not serve.
"""

from __future__ import annotations

from collections.abc import Iterable

from ember.cli.platform_client import PlatformRequestError
from ember.cli.session import Session
from ember.cli.worker_project import WorkerProject


def served_ids(session: Session) -> list[str] | None:
    """The ids the platform's AI serves (None: it would not say)."""
    try:
        rows = session.client.call(
            "GET", session.account_path("/ai/models/search"), params={"per_page": 1000}
        )
    except PlatformRequestError:
        return None
    return [str(row.get("name")) for row in rows if isinstance(row, dict)]


def mapping_notes(where: str, mapped: list[str], served: Iterable[str] | None) -> list[str]:
    """Warnings for ``mapped`` ids given what the platform at ``where`` serves."""
    if not mapped:
        return []
    if served is None:
        return [
            f"ai.models ({', '.join(mapped)}) applies to ember dev only; the platform at {where} "
            "serves the models its operator configured, and its AI API did not say which"
        ]
    offered = list(served)
    missing = [model for model in mapped if model not in offered]
    if not missing:
        return []
    return [
        f"ai.models maps {', '.join(missing)} for ember dev, but the platform at {where} does "
        f"not serve {'it' if len(missing) == 1 else 'them'} (its operator's config decides): "
        f"env.AI.run there answers 5007 No such model. It serves: {', '.join(offered) or 'none'}"
    ]


def deploy_notes(session: Session, project: WorkerProject) -> list[str]:
    mapped = list(project.ai_models)
    return mapping_notes(session.platform, mapped, served_ids(session)) if mapped else []
