"""After a temporary account expires, every command says so the same way ("your temporary account
NAME expired at T ...; `ember deploy --temporary` makes a new one"): ``ember ai run --url`` too
(it sent no token and printed the platform's 10000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from tests.serve.conftest import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
TTL_S = 10  # long enough to deploy and open the tail on a loaded machine
CONFIG = f"""\
platform:
  proof_of_work: {{k: 64, g: 64, sample: 8}}
  temporary: {{ttl: {TTL_S}s}}
"""


def test_ai_run_names_the_expired_account(tmp_path: Path) -> None:
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
        expires = json.loads(out)["expires_at"].replace("Z", "+00:00")
        while time.time() <= datetime.fromisoformat(expires).timestamp():
            time.sleep(0.5)
        ai = ember("ai", "run", "@cf/zai-org/glm-4.7-flash", "hi", "--json", "--url", serve.url)
        out, err = ai.communicate(timeout=120)
        assert ai.returncode == 1, err
        error = json.loads(out)["error"]
        assert error["kind"] == "auth" and "10000" not in err, err
        assert f"your temporary account {account} expired at" in error["message"]
        assert "`ember deploy --temporary` makes a new one" in error["message"]
    finally:
        serve.stop()
