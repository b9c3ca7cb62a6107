"""scripts/gpu_check.py runs its checks end to end here too (``--device cpu``), so the script a
GPU machine runs has been run before it gets there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bindings.ai.support import ROOT


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpu_check_script_on_cpu(tmp_path: Path) -> None:
    # Short streams: the phases at 1, 16 and 64 streams run as on a GPU, at an eighth of the tokens.
    command = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--device", "cpu"]
    command += ["--stream-tokens", "8"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path)], capture_output=True, text=True, timeout=880
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    for result in report["results"]:
        assert result["stream_ok"] and result["tool_call_ok"] and result["json_schema_ok"]
        assert [row["concurrency"] for row in result["throughput"]] == [1, 16, 64]
        assert all(row["tokens_per_s"] > 0 for row in result["throughput"])
