"""Turn a multipart worker upload into a validated ``WorkerUpload`` (no state is touched).

Rules from cloudflare-api.md §2.2 and §6: modules are identified by each part's *filename*
(wrangler names parts after modules, the SDK names them all ``files``); the ``metadata`` part is
found whatever its position and content type; ``main_module`` must be one of the modules.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from ember.runtime.deployments.bindings import validate_binding_specs
from ember.runtime.deployments.errors import InvalidUpload
from ember.runtime.deployments.metadata_limits import check_extra, check_flags
from ember.runtime.deployments.multipart import Part
from ember.runtime.deployments.records import Module, WorkerUpload
from ember.runtime.deployments.worker_limits import parse_limits
from ember.wirejson import WireJSONError, loads_strict

# wrangler's moduleTypeMimeType plus what the SDK and curl users send.
DEFAULT_CONTENT_TYPE = "application/octet-stream"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_KNOWN_EXTRA = {
    "logpush",
    "placement",
    "tail_consumers",
    "limits",
    "observability",
    "migrations",
    "usage_model",
    "code_update_strategy",
    "assets",
    "tags",
    "compatibility_flags",
}
MAX_MODULE_NAME = 1024
# Annotations (workers/message, workers/tag) are stored with every version and deployment.
MAX_ANNOTATION_CHARS = 1024
MAX_ANNOTATIONS = 16
MAX_SEGMENT_BYTES = 255  # NAME_MAX on Linux file systems


def parse_worker_upload(parts: list[Part]) -> WorkerUpload:
    metadata_parts = [
        p for p in parts if p.name == "metadata" and p.filename in (None, "blob", "metadata")
    ]
    if not metadata_parts:
        metadata_parts = [p for p in parts if p.name == "metadata"]
    if not metadata_parts:
        raise InvalidUpload(
            "the upload has no 'metadata' part; send a form field named metadata holding JSON "
            'such as {"main_module": "entry.py", "compatibility_date": "2026-11-01"}'
        )
    if len(metadata_parts) > 1:
        raise InvalidUpload("the upload has more than one 'metadata' part")
    metadata = _metadata_json(metadata_parts[0].data)
    others = [p for p in parts if p is not metadata_parts[0]]
    main_module = metadata.get("main_module")
    if main_module is None and "assets" in metadata and not others:
        # An assets-only Worker, as wrangler uploads one: the metadata alone, no modules.
        modules: list[Module] = []
        main_module = ""
    else:
        modules = _modules(others)
    if main_module is None:
        if "body_part" in metadata:
            raise InvalidUpload(
                "service-worker syntax (metadata.body_part) is not supported; "
                "upload ES modules or Python with metadata.main_module"
            )
        raise InvalidUpload(
            'metadata.main_module is missing: name the entry module, e.g. "main_module": "entry.py"'
        )
    if modules and (
        not isinstance(main_module, str) or main_module not in {m.name for m in modules}
    ):
        names = ", ".join(sorted(m.name for m in modules)) or "none"
        raise InvalidUpload(
            f"metadata.main_module {main_module!r} is not one of the uploaded modules ({names})"
        )
    if "limits" in metadata:  # stored as sent, once each key is checked
        parse_limits(metadata["limits"])
    flags = _string_list(metadata, "compatibility_flags")
    check_flags(flags)
    extra = {k: v for k, v in metadata.items() if k in _KNOWN_EXTRA - {"compatibility_flags"}}
    check_extra(extra)  # stored with the version as sent: bounded per field
    return WorkerUpload(
        main_module=main_module,
        modules=tuple(modules),
        bindings=validate_binding_specs(metadata.get("bindings", [])),
        compatibility_date=_compatibility_date(metadata.get("compatibility_date")),
        compatibility_flags=flags,
        keep_bindings=_string_list(metadata, "keep_bindings"),
        keep_vars=bool(metadata.get("keep_vars", False)),
        annotations=_annotations(metadata.get("annotations", {})),
        extra_metadata=extra,
    )


def _metadata_json(data: bytes) -> dict[str, Any]:
    try:
        metadata = loads_strict(data)  # no NaN, lone surrogates or runaway nesting
    except WireJSONError as exc:
        raise InvalidUpload(f"the 'metadata' part is not valid JSON: {exc}") from None
    if not isinstance(metadata, dict):
        raise InvalidUpload(
            f"the 'metadata' part must be a JSON object, got {type(metadata).__name__}"
        )
    return metadata


def _modules(parts: list[Part]) -> list[Module]:
    modules: list[Module] = []
    seen: set[str] = set()
    for part in parts:
        name = part.filename if part.filename else part.name
        check_module_name(name)
        if name in seen:
            raise InvalidUpload(f"module {name!r} is uploaded twice")
        seen.add(name)
        content_type = (part.content_type or DEFAULT_CONTENT_TYPE).split(";")[0].strip().lower()
        modules.append(Module(name=name, content_type=content_type, content=part.data))
    if not modules:
        raise InvalidUpload("the upload contains no modules: add the entry module as a file part")
    _check_module_tree(seen)
    return modules


def _check_module_tree(names: set[str]) -> None:
    """The modules must be writable as one directory tree: ``lib`` (a file) and ``lib/x.py``
    (which makes ``lib`` a directory) cannot both exist, so such an upload is refused here
    rather than failing when the version is written out."""
    for name in names:
        segments = name.split("/")
        for depth in range(1, len(segments)):
            directory = "/".join(segments[:depth])
            if directory in names:
                raise InvalidUpload(
                    f"module {directory!r} is a file, but module {name!r} needs it to be a "
                    "directory; rename one of them"
                )


def check_module_name(name: str) -> None:
    """A module path must stay inside the worker's directory when written out."""
    problem = None
    if not name or len(name) > MAX_MODULE_NAME:
        problem = f"must be 1 to {MAX_MODULE_NAME} characters"
    elif name.startswith("/") or "\\" in name:
        problem = "must be a relative path using '/'"
    elif any(ord(c) < 32 or c == "\x7f" for c in name):
        problem = "must not contain control characters"
    elif any(seg in ("", ".", "..") for seg in name.split("/")):
        problem = "must not contain empty, '.' or '..' path segments"
    elif any(
        len(seg.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES for seg in name.split("/")
    ):
        # Each segment becomes a file or directory name when the version is written out.
        problem = f"has a path segment longer than {MAX_SEGMENT_BYTES} bytes"
    if problem:
        raise InvalidUpload(f"module name {name!r} {problem}")


def _compatibility_date(value: Any) -> str | None:
    if value is None:
        return None
    try:
        date = datetime.date.fromisoformat(value) if _DATE.match(value) else None
    except (TypeError, ValueError):
        date = None
    if date is None:
        raise InvalidUpload(f"metadata.compatibility_date must be YYYY-MM-DD, got {value!r}")
    # Cloudflare's words and code (10021); "today" is UTC's, as there.
    if date > datetime.datetime.now(datetime.UTC).date():
        raise InvalidUpload(f"Can't set compatibility date in the future: {value}")
    return value


def _string_list(metadata: dict[str, Any], key: str) -> tuple[str, ...]:
    value = metadata.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidUpload(f"metadata.{key} must be a list of strings, got {value!r}")
    return tuple(value)


def _annotations(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidUpload("metadata.annotations must map strings to strings")
    if len(value) > MAX_ANNOTATIONS:
        raise InvalidUpload(
            f"metadata.annotations has {len(value):,} entries; ember stores at most "
            f"{MAX_ANNOTATIONS} (Cloudflare's are workers/message and workers/tag)"
        )
    for key, text in value.items():
        if len(key) > MAX_ANNOTATION_CHARS or len(text) > MAX_ANNOTATION_CHARS:
            raise InvalidUpload(
                f"metadata.annotations[{key[:64]!r}] is longer than {MAX_ANNOTATION_CHARS} "
                "characters"
            )
    return {k: v for k, v in value.items() if k != "workers/triggered_by"}
