"""``ember doctor`` prints every layer and the anonymous verdict; ``--json`` is machine-readable."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ember.cli.main import cli
from ember.runtime.sandbox import Layer


def test_doctor_lists_every_layer_and_the_verdict() -> None:
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 0, result.output
    for layer in Layer:
        assert f"] {layer.value}" in result.output
    assert "anonymous deployments (--temporary):" in result.output


def test_doctor_json_with_forced_off_layers() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--json", "--disable", "pid_ns,landlock"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["layers"]) == {layer.value for layer in Layer}
    assert data["layers"]["pid_ns"]["available"] is False
    assert data["layers"]["pid_ns"]["reason"].startswith("forced off by configuration")
    assert data["anonymous_minimum"]["met"] is False
    assert "pid_ns" in data["anonymous_minimum"]["missing"]


def test_doctor_rejects_unknown_layers() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--disable", "apparmor"])
    assert result.exit_code != 0
    assert "apparmor" in str(result.exception) + result.output


def test_doctor_says_whether_ember_serve_would_start_here() -> None:
    walled = CliRunner().invoke(cli, ["doctor", "--disable", "mount_ns"])
    assert walled.exit_code == 0, walled.output
    assert "ember serve: starts (workers kept out of the state directory by landlock)" in (
        walled.output
    )
    bare = CliRunner().invoke(cli, ["doctor", "--disable", "mount_ns,landlock"])
    assert "ember serve: REFUSES to start (no sandbox layer keeps a worker out" in bare.output
    assert "--trusted-workers" in bare.output
