"""What the CLI says when the platform took a request and closed the connection before answering.

That is not "cannot reach the platform": it was reached, and for a call that writes it may have
done the work before it went away (killed, restarted, out of memory), so running the command
again blindly could deploy twice or, worse, the user believes nothing happened. The message says
the outcome is unknown and names the command that shows it; for a read, that nothing changed.
"""

from __future__ import annotations

import re

import httpx

from ember.cli.failure import NoAnswer

READS = frozenset({"GET", "HEAD", "OPTIONS"})
# The httpx failures that come after the connection was made: the request went (whole or in
# part) and no answer came back. Connect errors and pool timeouts are "cannot reach".
AFTER_CONNECT = (
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
)
# (path pattern, the command that shows the outcome), the first match wins.
CHECKS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), check)
    for pattern, check in (
        (r"/workers/scripts/[^/]+/secrets", "`ember secret list`"),
        (r"/workers/scripts/[^/]+/schedules", "`ember deployments status`"),
        (r"/workers/scripts/", "`ember versions list` / `ember deployments status`"),
        (r"/storage/kv/namespaces/[^/]+/(values|bulk)", "`ember kv key list --remote`"),
        (r"/storage/kv/namespaces", "`ember kv namespace list`"),
        (r"/provisioning/previews/claim", "the claim URL (it says whether it was claimed)"),
    )
)
# A temporary account made then came with a token nobody received: it cannot be used, and goes
# unclaimed at its expiry.
NEW_TEMPORARY = re.compile(r"/provisioning/previews$")
# Writes that leave nothing lasting: a proof-of-work challenge, a tail session (it expires).
NOTHING_LASTING = re.compile(r"/provisioning/previews/challenge$|/workers/scripts/[^/]+/tails$")


def answer_lost(url: str, method: str, path: str, exc: Exception) -> NoAnswer:
    """The one line for a request the platform took and never answered."""
    reason = (str(exc) or type(exc).__name__).rstrip(".")
    call = f"{method} {path.split('?', 1)[0]}"
    said = f"the platform at {url} closed the connection before answering {call} ({reason})"
    bare = path.split("?", 1)[0]
    if method.upper() in READS or NOTHING_LASTING.search(bare):
        return NoAnswer(f"{said}; nothing was changed: run the command again once it is up")
    if NEW_TEMPORARY.search(bare):
        return NoAnswer(
            f"{said}: no temporary account reached you (one made then is unusable without its "
            "token and is deleted at its expiry); run the command again once it is up"
        )
    check = next((c for pattern, c in CHECKS if pattern.search(path)), "the platform's state")
    return NoAnswer(
        f"{said}: whether it was done is unknown (the platform may have finished it before the "
        f"connection closed). Check with {check} before running the command again."
    )
