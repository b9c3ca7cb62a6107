"""``ember deploy`` of a project with ``assets``: the files uploaded as wrangler uploads them.

The manifest (every asset's path, hash and size, ``.assetsignore`` applied, the platform's
limits checked: ``bindings/assets/files.py``) opens an upload session; the platform answers
which files it lacks, in buckets; each bucket is one multipart form of base64 contents
authorised by the session's token; the last answers the completion token the script upload
names in ``metadata.assets``. A file already on the platform is not sent again.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from ember.bindings.assets.files import build_manifest, content_type
from ember.bindings.assets.rule_files import HEADERS_FILE, REDIRECTS_FILE
from ember.bindings.assets.rules import read_rule_file
from ember.cli.session import Session, path_segment
from ember.config_assets import AssetsConfig
from ember.errors import UserError
from ember.runtime.deployments.multipart import Part, build_multipart


def asset_config(assets: AssetsConfig) -> dict[str, Any]:
    """``metadata.assets.config``: how the platform serves them (wrangler's names), with the
    texts of the directory's ``_redirects`` and ``_headers`` as wrangler sends them."""
    first: bool | list[str] = assets.run_worker_first
    if assets.worker_rules:
        first = [*assets.worker_rules, *("!" + rule for rule in assets.asset_rules)]
    config: dict[str, Any] = {
        "html_handling": assets.html_handling,
        "not_found_handling": assets.not_found_handling,
        "run_worker_first": first,
    }
    for name in (REDIRECTS_FILE, HEADERS_FILE):
        found = read_rule_file(assets.directory, name)
        if found is None:
            continue
        # Refused here, by its size on disk: the platform sees only the text, and a file read
        # up to its limit is that much of it, which could pass as a whole.
        if (problem := found.problem()) is not None:
            raise UserError(
                f"{assets.directory / name}: must be {problem} (ember's limit, as the "
                "platform's); nothing was uploaded"
            )
        config[name] = found.text
    return config


def sync_assets(session: Session, name: str, assets: AssetsConfig, fname: str) -> dict[str, Any]:
    """Upload what the platform lacks; ``metadata.assets`` for the script upload."""
    config = asset_config(assets)  # a rule file past its limits stops it before any upload
    entries = build_manifest(assets.directory, fname)
    by_hash = {entry.hash: entry for entry in entries}
    manifest = {e.path: {"hash": e.hash, "size": e.size} for e in entries}
    client = session.client
    script = session.account_path(f"/workers/scripts/{path_segment(name)}")
    started = client.call("POST", f"{script}/assets-upload-session", json={"manifest": manifest})
    token = started.get("jwt") if isinstance(started, dict) else None
    buckets = started.get("buckets") if isinstance(started, dict) else None
    if not isinstance(token, str) or not isinstance(buckets, list):
        raise UserError("the platform's assets upload session answered without a token")
    completion = token if not buckets else None
    for bucket in buckets:
        parts = []
        for digest in bucket:
            entry = by_hash.get(digest)
            if entry is None:
                raise UserError(f"the platform asked for asset {digest!r}, which is not here")
            data = base64.b64encode(entry.file.read_bytes())
            parts.append(Part(digest, digest, content_type(entry.path), data))
        boundary = "----ember-" + secrets.token_hex(12)
        answer = client.call(
            "POST",
            session.account_path("/workers/assets/upload?base64=true"),
            content=build_multipart(parts, boundary),
            headers={
                "content-type": f"multipart/form-data; boundary={boundary}",
                "authorization": f"Bearer {token}",
            },
        )
        if isinstance(answer, dict) and isinstance(answer.get("jwt"), str):
            completion = answer["jwt"]
    if completion is None:
        raise UserError("the platform did not complete the assets upload; deploy again")
    return {"jwt": completion, "config": config}
