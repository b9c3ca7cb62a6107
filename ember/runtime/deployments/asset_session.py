"""An assets upload session and an account's asset bookkeeping, and the small helpers
``AssetStore`` (``assets.py``) uses on them: tokens, strict base64 in slices, counting bytes."""

from __future__ import annotations

import base64
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ember.runtime.deployments.asset_files import AssetBound

SESSION_TTL_S = 3600.0
# Sessions one account holds at once (wrangler opens one per deploy and uses it at once): a
# ninth drops the oldest rather than being refused, so a client that died mid-upload does not
# lock its account out of deploying for the hour its sessions would live.
MAX_OPEN_SESSIONS = 8
_DECODE_SLICE = 1024 * 1024  # base64 characters decoded in one call (a multiple of 4)


@dataclass
class Session:
    account_id: str
    manifest_id: str
    sizes: dict[str, int]  # hash -> size, of the files still to upload
    expires: float
    text: bytes = b""  # the manifest, written to disk only when a version uses it (``resolve``)
    serial: int = 0  # the order sessions started in (the oldest is dropped first)
    bound: AssetBound | None = None
    completion: str | None = None
    # Script uploads resolving this session now (``resolve`` .. ``settle``), and whether one
    # stored a version: from then on the version references the manifest, not the session.
    resolving: int = 0
    stored: bool = False


@dataclass
class AccountAssets:
    """One account's asset bookkeeping: its lock (a session's start, the byte count and the
    sweep are one at a time) and the bytes its files take (scanned once, then kept up to date;
    bytes being written are counted from when their upload was let in), and how many uploads
    are writing its files now (the sweep leaves ``.part-`` files alone until none is)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    stored: int | None = None
    writing: int = 0
    # Freed once no call uses it (``users``) and the account holds no session (``tokens``:
    # upload and completion tokens): kept for every account ever seen, memory only grew.
    users: int = 0
    tokens: set[str] = field(default_factory=set)
    pending: int = 0  # what its open sessions still expect, as counted in the pool
    temporary: bool = False  # counted in the temporary accounts' pool (``asset_pool.py``)
    # Deleted (``AssetStore.forget``): no session starts, no upload writes, and one writing
    # its files then deletes them, while a call still holds this record.
    gone: bool = False


def new_token() -> str:
    return secrets.token_urlsafe(32)


def decode(encoded: bytes) -> bytes:
    """Strict base64, 1 MiB of text at a time: one call over a 25 MiB file held the GIL, and
    with it the event loop on another thread, for tens of ms; between slices it can switch.
    Slices are whole quads, so padding can only be in the last one, as in the whole."""
    view = memoryview(encoded)
    step = _DECODE_SLICE
    return b"".join(
        base64.b64decode(view[start : start + step], validate=True)
        for start in range(0, len(view), step)
    )


def scan(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size
        except OSError:
            continue
    return total
