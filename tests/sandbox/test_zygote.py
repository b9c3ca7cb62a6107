"""enter() from a child of a warm, zygote-like process (asyncio, msgpack imported; no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.runtime.sandbox import Layer, LayerReport
from tests.sandbox.conftest import Tenants

ROOT = Path(__file__).resolve().parents[2]


def test_worker_forked_from_a_warm_zygote(
    report: LayerReport, tenants: Tenants, pool_uid: int
) -> None:
    if not report.minimum().met:
        pytest.skip(f"anonymous minimum not met here: {report.minimum().explanation}")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        # The repo root first; keep what the suite itself was given (a venv on PYTHONPATH).
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "EMBER_ZYGOTE_CANARY": "zygote-exec-env-secret",
    }
    uid = pool_uid if os.geteuid() == 0 else 0
    done = subprocess.run(
        [sys.executable, "-m", "tests.sandbox.zygote_main", str(tenants.code_a), str(uid)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["exit"] == 0
    assert out["startup"]["monitor_pid"] == out["startup"]["child"]
    worker = out["worker"]
    assert worker["pid"] == (
        1 if Layer.PID_NS.value in out["startup"]["layers"] else out["startup"]["worker_pid"]
    )
    assert worker["decimal"] == "3.30"
    assert worker["brotli"] == "hello from brotli"
    assert worker["fetch"] == "hi"
    assert worker["environ"] == {"WORKER_VAR": "1"}  # not the zygote's canary
    assert worker["torch_loaded"] is False
