"""The platform's key for the AI cache salts (``ai_cache_salt``): made once, kept in its state,
so a restarted platform gives every account the salt it had (its replicas' caches still hit);
another platform's differs, so an account id alone says nothing about its salt."""

from __future__ import annotations

from pathlib import Path

from ember.runtime.deployments.plane import ControlPlane


def test_the_key_outlives_a_restart_and_differs_between_platforms(tmp_path: Path) -> None:
    first, other = ControlPlane(tmp_path / "a"), ControlPlane(tmp_path / "b")
    try:
        key = first.meta_secret("ai_cache_salt")
        assert len(key) == 32 and other.meta_secret("ai_cache_salt") != key
    finally:
        first.close()
        other.close()
    again = ControlPlane(tmp_path / "a")
    try:
        assert again.meta_secret("ai_cache_salt") == key
    finally:
        again.close()
