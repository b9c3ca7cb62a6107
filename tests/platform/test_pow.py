"""Proof of work: the sampled server check against the full reference, token binding, replay."""

from __future__ import annotations

import base64
import hashlib
import os
import random

import pytest

from ember.runtime.deployments import pow
from ember.runtime.deployments.errors import ProofOfWorkRejected


def test_solution_layout_matches_the_wrangler_algorithm() -> None:
    seed = os.urandom(32)
    raw = pow.solve(seed, k=3, g=5)
    h = hashlib.sha256(seed).digest()
    expected = [h]
    for _ in range(3):
        for _ in range(5):
            h = hashlib.sha256(h).digest()
        expected.append(h)
    assert raw == b"".join(expected)


@pytest.mark.parametrize("trial", range(5))
def test_sampled_verification_agrees_with_full_reference(trial: int) -> None:
    rng = random.Random()
    k, g = rng.randint(1, 40), rng.randint(1, 40)
    seed = os.urandom(32)
    raw = pow.solve(seed, k, g)
    assert pow.verify_full(seed, k, g, raw)
    assert pow.verify_sampled(seed, k, g, raw, sample=rng.randint(1, k))
    # Corrupt one random segment end: the full check and a full-size sample both reject it.
    j = rng.randrange(1, k + 1)
    broken = bytearray(raw)
    broken[j * 32] ^= 0x01
    assert not pow.verify_full(seed, k, g, bytes(broken))
    assert not pow.verify_sampled(seed, k, g, bytes(broken), sample=k)
    # Wrong length and wrong first checkpoint are rejected whatever the sample.
    assert not pow.verify_sampled(seed, k, g, raw[:-32], sample=k)
    assert not pow.verify_sampled(os.urandom(32), k, g, raw, sample=k)


def test_tokens_are_bound_to_seed_k_g_and_expire() -> None:
    signer = pow.ChallengeSigner(os.urandom(32))
    challenge = signer.issue(k=10, g=20, ttl_seconds=60, now=1000.0)
    assert signer.open(challenge.token, now=1010.0) == challenge
    payload, mac = challenge.token.split(".")
    fields = pow.b64url_decode(payload).replace(b'"k":10', b'"k":1')
    with pytest.raises(ProofOfWorkRejected, match="not issued"):
        signer.open(f"{pow.b64url(fields)}.{mac}", now=1010.0)
    with pytest.raises(ProofOfWorkRejected, match="expired"):
        signer.open(challenge.token, now=1061.0)
    with pytest.raises(ProofOfWorkRejected, match="not issued"):
        pow.ChallengeSigner(os.urandom(32)).open(challenge.token, now=1010.0)
    with pytest.raises(ProofOfWorkRejected, match="malformed"):
        signer.open("garbage", now=1010.0)


def test_decode_solution_checks_shape() -> None:
    challenge = pow.Challenge("t", pow.b64url(os.urandom(32)), 4, 2, 0.0)
    good = base64.b64encode(bytes(32 * 5)).decode()
    assert len(pow.decode_solution({"checkpoints": good}, challenge)) == 160
    for bad in (
        {},
        {"checkpoints": 5},
        {"checkpoints": "!!!"},
        {"checkpoints": base64.b64encode(bytes(32)).decode()},
    ):
        with pytest.raises(ProofOfWorkRejected):
            pow.decode_solution(bad, challenge)


def test_solve_challenge_round_trip_with_plane(tmp_path) -> None:  # noqa: ANN001
    from ember.runtime.deployments.plane import ControlPlane
    from tests.platform.conftest import TEST_CONFIG

    plane = ControlPlane(tmp_path, TEST_CONFIG)
    challenge = plane.issue_challenge()
    solution = {"checkpoints": pow.solve_challenge(challenge)}
    created = plane.create_temporary_account("10.0.0.1", challenge.token, solution)
    assert created.account.temporary
    with pytest.raises(ProofOfWorkRejected, match="already used"):
        plane.create_temporary_account("10.0.0.1", challenge.token, solution)
    other = plane.issue_challenge()
    with pytest.raises(ProofOfWorkRejected, match="wrong|bytes"):
        plane.create_temporary_account("10.0.0.1", other.token, solution)
    plane.close()
