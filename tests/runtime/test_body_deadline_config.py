"""``server.body_timeout`` and ``server.body_min_rate`` in ``ember serve``'s config: parsed like the
other ``server:`` keys, and a bad value refused naming the key and what it takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ember.errors import ConfigError
from ember.runtime.connguard import (
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_BODY_TIMEOUT_S,
    ConnectionLimits,
    parse_connection_limits,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_defaults_are_nginx_s_minute_and_a_slow_link_s_rate() -> None:
    limits = parse_connection_limits(None, "serve.yaml")
    assert limits.body_timeout_s == DEFAULT_BODY_TIMEOUT_S == 60
    assert limits.body_min_rate == DEFAULT_BODY_MIN_RATE == 8 * 1024
    assert ConnectionLimits().body_timeout_s == 60  # ember dev's


def test_values_take_units() -> None:
    limits = parse_connection_limits({"body_timeout": "2m", "body_min_rate": "64KiB"}, "s.yaml")
    assert (limits.body_timeout_s, limits.body_min_rate) == (120, 64 * 1024)
    assert parse_connection_limits({"body_timeout": 5}, "s.yaml").body_timeout_s == 5
    assert "request body" in limits.line() and "server.body_timeout" in limits.line()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("body_timeout", 0, "a duration such as"),
        ("body_timeout", -3, "a duration such as"),
        ("body_timeout", "fast", "a duration such as"),
        ("body_timeout", True, "a duration such as"),
        ("body_timeout", None, "a duration such as"),
        ("body_min_rate", 0, "a size such as"),
        ("body_min_rate", "lots", "a size such as"),
        ("body_min_rate", [1], "a size such as"),
    ],
)
def test_a_bad_value_names_the_key_and_what_it_takes(
    key: str, value: object, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_connection_limits({key: value}, "serve.yaml")
    assert caught.value.key == f"server.{key}"
    assert expected in str(caught.value)


def test_ember_serve_refuses_a_bad_body_timeout_before_it_listens(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("server:\n  body_timeout: soon\n")
    done = subprocess.run(
        [sys.executable, "-m", "ember", "serve", "--port", "0", "--state-dir",
         str(tmp_path / "state"), "--config", str(config)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode != 0
    assert "server.body_timeout: expected a duration such as" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
