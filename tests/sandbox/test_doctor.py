"""``ember doctor`` prints every layer and the anonymous verdict; ``--json`` is machine-readable;
``--state-dir`` is the one ``ember serve`` would be given."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import ember
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


def test_doctor_checks_the_state_dir_serve_would_be_given(tmp_path: Path) -> None:
    # A state directory inside ember's own package lies beneath a path every worker may read,
    # so `ember serve --state-dir` there refuses to start while the default one would not:
    # doctor must answer for the directory it is given, as serve takes it.
    readable = Path(ember.__file__).resolve().parent / "not-a-state-dir"
    exposed = CliRunner().invoke(cli, ["doctor", "--state-dir", str(readable)])
    assert exposed.exit_code == 0, exposed.output
    assert f"ember serve --state-dir {readable}: REFUSES to start" in exposed.output
    assert f"the state directory {readable} lies beneath" in exposed.output
    assert not readable.exists()  # probed, not created
    data = json.loads(
        CliRunner().invoke(cli, ["doctor", "--json", "--state-dir", str(readable)]).output
    )
    assert data["serve"]["state_dir"] == str(readable) and data["serve"]["starts"] is False

    private = CliRunner().invoke(cli, ["doctor", "--state-dir", str(tmp_path)])
    assert f"ember serve --state-dir {tmp_path}: starts" in private.output, private.output
    from_env = CliRunner().invoke(cli, ["doctor"], env={"EMBER_STATE_DIR": str(readable)})
    assert f"the state directory {readable} lies beneath" in from_env.output  # serve's default
