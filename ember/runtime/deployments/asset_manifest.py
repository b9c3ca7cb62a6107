"""What an assets upload session and a script upload's ``metadata.assets`` send, checked.

The manifest (``{"/path": {"hash", "size"}}``) as Cloudflare bounds it (100,000 files of at most
25 MiB; a temporary account's 1,000 of 5 MiB), the version's asset config as ``ember dev``
checks the ``assets`` key, and the buckets a session asks the client to upload in.
"""

from __future__ import annotations

import re
from typing import Any

from ember.bindings.assets.files import MAX_ASSET_COUNT, MAX_ASSET_SIZE, safe_relative
from ember.bindings.assets.rules import (
    MAX_RULES_FILE_BYTES,
    MAX_RULES_FILE_LINES,
    rule_file_problem,
)
from ember.config_assets import HTML_HANDLING, NOT_FOUND_HANDLING, routing_rules
from ember.errors import ConfigError
from ember.runtime.deployments.errors import InvalidRequest, InvalidUpload
from ember.runtime.deployments.metadata_limits import RULE_FILE_KEYS
from ember.runtime.deployments.upload import MAX_SEGMENT_BYTES

# A temporary account's assets, as Cloudflare bounds a temporary (unclaimed) account's.
TEMPORARY_MAX_FILES = 1_000
TEMPORARY_MAX_FILE_BYTES = 5 * 1024 * 1024
BUCKET_FILES = 50
BUCKET_BYTES = 40 * 1024 * 1024  # of file content per upload request (before base64)
_HASH = re.compile(r"^[0-9a-f]{32}$")
ASSET_CONFIG_KEYS = ("html_handling", "not_found_handling", "run_worker_first")
# RULE_FILE_KEYS: the texts of the assets directory's _redirects and _headers, as wrangler
# sends them (the files are configuration, never uploaded as assets); parsed once where the
# version is served.


def parse_manifest(body: object) -> dict[str, dict[str, Any]]:
    manifest = body.get("manifest") if isinstance(body, dict) else None
    if not isinstance(manifest, dict):
        raise InvalidRequest('expected {"manifest": {"/path": {"hash": "...", "size": N}}}')
    if len(manifest) > MAX_ASSET_COUNT:
        raise InvalidRequest(
            f"the manifest has {len(manifest):,} files; at most {MAX_ASSET_COUNT:,}"
        )
    out: dict[str, dict[str, Any]] = {}
    for path, entry in manifest.items():
        relative = safe_relative(path) if isinstance(path, str) else None
        if not relative or relative.endswith("/") or "//" in path or len(path) > 1024:
            raise InvalidRequest(
                f"manifest path {str(path)[:80]!r} is not a file path such as /a.txt"
            )
        too_long = [
            s
            for s in path.split("/")
            if len(s.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES
        ]
        if too_long:
            # Each segment becomes a file or directory name when a version's tree is written out.
            raise InvalidRequest(
                f"manifest path {path[:200]!r} has a path segment longer than {MAX_SEGMENT_BYTES} "
                "bytes (a file or directory name)"
            )
        if not isinstance(entry, dict):
            raise InvalidRequest(f"manifest entry {path!r} must be {{hash, size}}")
        digest, size = entry.get("hash"), entry.get("size")
        if not isinstance(digest, str) or not _HASH.match(digest):
            raise InvalidRequest(f"manifest entry {path!r}: hash must be 32 hex digits")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_ASSET_SIZE:
            raise InvalidRequest(
                f"manifest entry {path!r}: size must be 0 to {MAX_ASSET_SIZE} bytes (25 MiB)"
            )
        out[path] = {"hash": digest, "size": size}
    _check_tree(out)
    return out


def temporary_limits(manifest: dict[str, dict[str, Any]]) -> None:
    if len(manifest) > TEMPORARY_MAX_FILES:
        raise InvalidRequest(
            f"the manifest has {len(manifest):,} files; a temporary account's assets are at "
            f"most {TEMPORARY_MAX_FILES:,} files (claim the account for more)"
        )
    for path, entry in manifest.items():
        if entry["size"] > TEMPORARY_MAX_FILE_BYTES:
            raise InvalidRequest(
                f"asset {path!r} is {entry['size']:,} bytes; a temporary account's assets are "
                f"at most {TEMPORARY_MAX_FILE_BYTES:,} bytes (5 MiB) each"
            )


def _check_tree(manifest: dict[str, dict[str, Any]]) -> None:
    """A path cannot be a file and a directory at once (``/a`` and ``/a/b``)."""
    for path in manifest:
        parts = path.split("/")
        for depth in range(2, len(parts)):
            if "/".join(parts[:depth]) in manifest:
                raise InvalidRequest(
                    f"manifest path {path!r} is under the file {'/'.join(parts[:depth])!r}"
                )


def parse_config(config: object) -> dict[str, Any]:
    """``metadata.assets.config`` checked as ember dev checks the ``assets`` key."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InvalidUpload("metadata.assets.config must be an object")
    out = {k: config[k] for k in ASSET_CONFIG_KEYS if config.get(k) is not None}
    for key in RULE_FILE_KEYS:
        text = config.get(key)
        if text is None:
            continue
        problem = "a string" if not isinstance(text, str) else rule_file_problem(text)
        if problem is not None:
            raise InvalidUpload(
                f"metadata.assets.config.{key} must be the text of the {key} file, {problem} "
                f"(ember's limits: {MAX_RULES_FILE_LINES:,} lines, {MAX_RULES_FILE_BYTES:,} bytes)"
            )
        out[key] = text
    for key, allowed in (
        ("html_handling", HTML_HANDLING),
        ("not_found_handling", NOT_FOUND_HANDLING),
    ):
        if key in out and out[key] not in allowed:
            raise InvalidUpload(
                f"metadata.assets.config.{key} is {out[key]!r}; expected one of "
                + ", ".join(allowed)
            )
    first = out.get("run_worker_first")
    if first is not None and not isinstance(first, bool):
        if not isinstance(first, list) or not all(isinstance(r, str) for r in first):
            raise InvalidUpload("metadata.assets.config.run_worker_first must be a bool or rules")
        try:
            routing_rules(first, "metadata", "assets.config.run_worker_first")
        except ConfigError as exc:
            raise InvalidUpload(str(exc)) from None
    return out


def buckets(sizes: dict[str, int]) -> list[list[str]]:
    buckets: list[list[str]] = []
    current: list[str] = []
    total = 0
    for digest, size in sorted(sizes.items()):
        if current and (len(current) >= BUCKET_FILES or total + size > BUCKET_BYTES):
            buckets.append(current)
            current, total = [], 0
        current.append(digest)
        total += size
    if current:
        buckets.append(current)
    return buckets
