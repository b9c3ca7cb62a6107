"""When a file's stat cannot show its latest change yet, and the content checks used instead.

A timestamp is taken from the kernel's coarse clock (a tick of up to 10 ms before Linux 6.13;
FAT keeps mtimes to 2 s; a network mount keeps its server's clock): a change made in the same
tick as the previous one leaves mtime and ctime as they were, and a same-size edit then leaves
the whole stat unchanged. git calls such index entries "racily clean" and compares their
content until a later look can trust their stat; ``ember dev``'s watcher and its module stage
do the same with ``RACY_NS`` as the tick.
"""

from __future__ import annotations

import hashlib

# Longer than any timestamp tick ember expects (FAT's 2 s mtime resolution included).
RACY_NS = 2_000_000_000


def racy(mtime_ns: int, first_seen_ns: int, now_ns: int) -> bool:
    """Whether a stat whose mtime is ``mtime_ns``, first seen unchanged at ``first_seen_ns``,
    may still hide a change made after it in the same tick, as of a look at ``now_ns``.
    Trusted once the look is RACY_NS past either time: past the mtime, a new change has a new
    one; past the first sighting, so does a change on a clock that runs ahead of ours (a mount,
    or a tree unpacked with future dates, whose mtime never falls behind now)."""
    return mtime_ns >= now_ns - RACY_NS and now_ns < first_seen_ns + RACY_NS


def digest(path: str) -> bytes | None:
    """A digest of the file's content; None if it cannot be read (gone, or no file)."""
    try:
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "blake2b").digest()
    except OSError:
        return None


def same_bytes(a: str, b: str) -> bool:
    """Whether two files hold the same bytes (False when either cannot be read)."""
    try:
        with open(a, "rb") as left, open(b, "rb") as right:
            while True:
                chunk = left.read(1 << 20)
                if chunk != right.read(1 << 20):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False
