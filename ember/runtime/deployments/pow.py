"""Proof of work for temporary accounts, exactly as wrangler's ``workers-auth/src/pow.ts``.

The client hashes ``h0 = SHA256(seed)`` and then ``k`` segments of ``g`` sequential SHA-256 steps,
recording the ``k + 1`` checkpoints (cloudflare-api.md §4.2). Segments are independent given their
start, so the server checks a random sample of them (``sample * g`` hashes) while the client had to
do all ``k * g`` in order. A solution that fakes a fraction ``f`` of its segments passes with
probability ``(1 - f) ** sample``.

Challenge tokens are stateless and self-describing: ``payload.mac`` where the payload carries the
seed, ``k``, ``g`` and an expiry, MACed with the platform key. A token is therefore bound to its
seed, k and g (change any and the MAC fails); single use is enforced by the caller recording the
token's hash (``used_challenges``) in the same transaction that creates the account.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from ember.runtime.deployments.errors import ProofOfWorkRejected

SEED_BYTES = 32
DIGEST_BYTES = 32


@dataclass(frozen=True)
class Challenge:
    token: str
    seed: str  # base64url without padding, as wrangler decodes it
    k: int
    g: int
    expires_at: float

    def to_api(self) -> dict[str, object]:
        return {"challengeToken": self.token, "seed": self.seed, "k": self.k, "g": self.g}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def solve(seed: bytes, k: int, g: int) -> bytes:
    """The client's work: all ``k * g`` hashes in sequence; returns the raw checkpoints."""
    sha256 = hashlib.sha256
    h = sha256(seed).digest()
    out = [h]
    for _ in range(k):
        for _ in range(g):
            h = sha256(h).digest()
        out.append(h)
    return b"".join(out)


def solve_challenge(challenge: Challenge) -> str:
    """``solution.checkpoints`` for a challenge: standard base64 with padding, like wrangler."""
    raw = solve(b64url_decode(challenge.seed), challenge.k, challenge.g)
    return base64.b64encode(raw).decode("ascii")


def verify_segments(seed: bytes, k: int, g: int, raw: bytes, segments: Iterable[int]) -> bool:
    """Check the length, the first checkpoint, and each listed segment ``j`` (cp[j] -> cp[j+1])."""
    if len(raw) != DIGEST_BYTES * (k + 1):
        return False
    sha256 = hashlib.sha256
    if raw[:DIGEST_BYTES] != sha256(seed).digest():
        return False
    for j in segments:
        h = raw[j * DIGEST_BYTES : (j + 1) * DIGEST_BYTES]
        for _ in range(g):
            h = sha256(h).digest()
        if not hmac.compare_digest(h, raw[(j + 1) * DIGEST_BYTES : (j + 2) * DIGEST_BYTES]):
            return False
    return True


def verify_full(seed: bytes, k: int, g: int, raw: bytes) -> bool:
    """The slow reference: every segment (what the client paid)."""
    return verify_segments(seed, k, g, raw, range(k))


def verify_sampled(seed: bytes, k: int, g: int, raw: bytes, sample: int) -> bool:
    """The server's check: ``sample`` segments chosen with an unpredictable RNG."""
    chosen = secrets.SystemRandom().sample(range(k), min(sample, k))
    return verify_segments(seed, k, g, raw, chosen)


class ChallengeSigner:
    """Issues and opens stateless challenge tokens MACed with the platform's key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("the challenge key must be at least 32 bytes")
        self._key = key

    def issue(self, k: int, g: int, ttl_seconds: int, now: float) -> Challenge:
        seed = b64url(secrets.token_bytes(SEED_BYTES))
        expires_at = float(int(now) + ttl_seconds)
        payload = json.dumps(
            {"seed": seed, "k": k, "g": g, "exp": int(expires_at)}, separators=(",", ":")
        ).encode()
        token = f"{b64url(payload)}.{b64url(self._mac(payload))}"
        return Challenge(token=token, seed=seed, k=k, g=g, expires_at=expires_at)

    def open(self, token: object, now: float) -> Challenge:
        """Return the challenge a token describes, or raise if it is forged or expired."""
        if not isinstance(token, str) or token.count(".") != 1 or len(token) > 1024:
            raise ProofOfWorkRejected("challengeToken is missing or malformed")
        payload_text, mac_text = token.split(".")
        try:
            payload = b64url_decode(payload_text)
            mac = b64url_decode(mac_text)
        except (ValueError, TypeError) as exc:
            raise ProofOfWorkRejected("challengeToken is malformed") from exc
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise ProofOfWorkRejected("challengeToken was not issued by this platform")
        fields = json.loads(payload)
        if now >= fields["exp"]:
            raise ProofOfWorkRejected(
                "the proof-of-work challenge expired; request a new one and solve it again"
            )
        return Challenge(token, fields["seed"], fields["k"], fields["g"], float(fields["exp"]))

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, b"ember-pow-v1\x00" + payload, hashlib.sha256).digest()


def decode_solution(solution: object, challenge: Challenge) -> bytes:
    """``{"checkpoints": base64}`` -> raw bytes of the right length, or a clear rejection."""
    if not isinstance(solution, dict) or not isinstance(solution.get("checkpoints"), str):
        raise ProofOfWorkRejected('solution must be {"checkpoints": "<base64>"}')
    text = solution["checkpoints"]
    expected = DIGEST_BYTES * (challenge.k + 1)
    if len(text) > 4 * (expected // 3 + 3):
        raise ProofOfWorkRejected(f"solution.checkpoints is longer than {expected} bytes")
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise ProofOfWorkRejected("solution.checkpoints is not valid base64") from exc
    if len(raw) != expected:
        raise ProofOfWorkRejected(
            f"solution.checkpoints holds {len(raw)} bytes; expected {expected} (32 * (k + 1))"
        )
    return raw
