"""``GET /client/v4/accounts/{account}/ai/models/search``: the platform's catalog listing.

Filtering and paging happen here, as on the platform: wrangler's ``ai models --search/--author
/--task`` sends them as query parameters and shows what comes back, and the cloudflare SDK
pages (``page=1, 2, ...``) until a page comes back empty, so a server that ignores ``page``
makes ``for m in client.ai.models.list(...)`` loop forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import describe

TASK = {"id": "text-generation", "name": "Text Generation", "description": ""}
SOURCE = 1  # the Workers AI catalog (the platform's other sources are finetunes)
DEFAULT_PER_PAGE = 50  # what wrangler asks for
MAX_PER_PAGE = 1000
CAPABILITIES = ("function_calling", "reasoning", "vision")


@dataclass(frozen=True, slots=True)
class ModelSearch:
    """The query parameters, validated (InvalidRequestField names the bad one)."""

    search: str | None = None
    author: str | None = None
    task: str | None = None
    source: int | None = None
    hide_experimental: bool = False
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> ModelSearch:
        hide = query.get("hide_experimental", "false").lower()
        if hide not in ("true", "false"):
            raise InvalidRequestField("/hide_experimental", "true or false", describe(hide))
        source = query.get("source")
        return cls(
            search=query.get("search") or None,
            author=query.get("author") or None,
            task=query.get("task") or None,
            source=None if source is None else _number(query, "source", 0, 2**31),
            hide_experimental=hide == "true",
            page=_number(query, "page", 1, 2**31) if "page" in query else 1,
            per_page=(
                _number(query, "per_page", 1, MAX_PER_PAGE)
                if "per_page" in query
                else DEFAULT_PER_PAGE
            ),
        )

    def select(self, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The page of ``entries`` (catalog rows as ``catalog_entry`` makes them) that match."""
        found = [entry for entry in entries if self._matches(entry)]
        start = (self.page - 1) * self.per_page
        return found[start : start + self.per_page]

    def _matches(self, entry: dict[str, Any]) -> bool:
        if self.source is not None and self.source != entry["source"]:
            return False
        if self.author is not None and self.author.lower() != author_of(entry["id"]):
            return False
        if self.task is not None and self.task.lower() not in (
            entry["task"]["id"].lower(),
            entry["task"]["name"].lower(),
        ):
            return False
        if self.search is not None:
            needle = self.search.lower()
            text = (entry["id"], entry["name"], entry["description"])
            return any(needle in part.lower() for part in text)
        return True  # nothing ember serves is experimental


def catalog_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """One ``AIGateway.models()`` row as the platform's ``AiModelsSearchObject``."""
    here = row.get("ember") or {}
    return {
        "id": row["id"],
        "name": row["id"],
        "source": SOURCE,
        "description": _description(row["architecture"], here),
        "task": dict(TASK),
        "tags": [],
        "properties": [
            {"property_id": "context_window", "value": str(row["context_window"])},
            # Only the capabilities the id has, as the platform lists them (Kimi and
            # GLM-5.3-Flash read images there); what ember serves is under "ember".
            *({"property_id": flag, "value": "true"} for flag in CAPABILITIES if row.get(flag)),
        ],
        "ember": dict(here),
    }


def _description(architecture: str, here: Mapping[str, Any]) -> str:
    """One line a person reads (``wrangler ai models`` prints it): what answers here."""
    if here.get("shipped"):
        checkpoint = f"the shipped ~10M-parameter checkpoint {here['checkpoint']}"
    else:
        checkpoint = f"the checkpoint {here.get('checkpoint', '')}".rstrip()
    return f"{architecture} served locally by ember from {checkpoint} (text only)"


def author_of(model_id: str) -> str:
    """``@cf/zai-org/glm-4.7-flash`` -> ``zai-org``."""
    parts = model_id.split("/")
    return parts[1].lower() if len(parts) >= 3 else ""


def _number(query: Mapping[str, str], key: str, low: int, high: int) -> int:
    raw = query[key]
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidRequestField(f"/{key}", f"an integer from {low} to {high}", describe(raw))
    return int(raw)
