"""A running ``ember tail`` whose temporary account expires says so ("the tail of W ended: your
temporary account NAME expired at T ...; `ember deploy --temporary` makes a new one"), as every
other command does: the platform closes the socket at the expiry, and the CLI said only "the
tail of W was closed by the platform"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
TTL_S = 10  # long enough to deploy and open the tail on a loaded machine
CONFIG = f"""\
platform:
  proof_of_work: {{k: 64, g: 64, sample: 8}}
  temporary: {{ttl: {TTL_S}s}}
"""


def test_a_tail_ended_by_the_expiry_says_so(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG, "--gc-interval", "3600")
    project = tmp_path / "project"
    project.mkdir()
    (project / "ember.yaml").write_text("name: w1\nmain: worker.py\n")
    (project / "worker.py").write_text(
        "from workers import Response\n\nasync def on_fetch(request, env):\n"
        "    return Response('hi')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"PYTHONPATH": str(ROOT), "EMBER_PLATFORM": serve.url,
            "EMBER_CREDENTIALS": str(tmp_path / "credentials.json")}  # fmt: skip

    def ember(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "ember", *args], cwd=project, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    try:
        out, err = ember("deploy", "--temporary", "--json").communicate(timeout=120)
        account = json.loads(out)["account"]
        tail = ember("tail", "w1", "--format", "json")
        _, tail_err = tail.communicate(timeout=TTL_S + 120)  # ends at the expiry
        assert tail.returncode == 1, tail_err
        assert f"the tail of w1 ended: your temporary account {account} expired at" in tail_err
        assert "`ember deploy --temporary` makes a new one" in tail_err

    finally:
        serve.stop()
