"""SIGTERM on ember serve, then the model replica dies during the HTTP drain: it is not launched
again (the pool's own stop comes after the drain; relaunching it there only to stop it cost a
load, and on a GPU node minutes), and the stream it was serving ends with the usual 3040 error
event and ``[DONE]``."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.serve.conftest import BASE_CONFIG, TINY_GLM, ServeProcess, permanent_account
from tests.serve.test_drain_ai_streams import LONG, MODEL, Listener, _listen

# A drain far longer than the test needs: the stream is ended by the replica's death, not by it.
CONFIG = (
    BASE_CONFIG
    + f"""\
ai:
  pool: {{drain_timeout_s: 60, restart_backoff_s: 0.05}}
  models:
    "{MODEL}":
      checkpoint: {TINY_GLM}
      args: ["--torch-threads", "1", "--kv-cache-bytes", "64MiB"]
"""
)


def _replica_pids(parent: int) -> list[int]:
    """The model servers ``parent`` launched (its children running ``ember models serve``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"models" in argv and b"serve" in argv:
            pids.append(int(entry.name))
    return pids


def test_a_replica_that_dies_during_the_drain_is_not_relaunched(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    serve = ServeProcess(tmp_path_factory.mktemp("drain-death") / "state", CONFIG)
    try:
        account_id, token = permanent_account(serve, "draindeath")
        rest = Listener("rest")
        thread = threading.Thread(
            target=_listen,
            args=(rest, "POST", f"{serve.url}/client/v4/accounts/{account_id}/ai/run/{MODEL}"),
            kwargs={
                "headers": {"authorization": f"Bearer {token}"},
                "json": {"prompt": "def", "stream": True, **LONG},
            },
            daemon=True,
        )
        thread.start()
        assert rest.started.wait(300), "no stream"
        assert rest.failure is None and rest.lines, rest.failure
        assert serve.proc is not None
        pids = _replica_pids(serve.proc.pid)
        assert len(pids) == 1, pids
        serve.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        while "shutting down, draining" not in serve.output():
            assert time.monotonic() < deadline, serve.output()[-3000:]
            time.sleep(0.05)
        os.killpg(pids[0], signal.SIGKILL)
        thread.join(120)
        serve.proc.wait(120)
    finally:
        serve.stop()
    log = serve.output()
    assert rest.failure is None, rest.failure
    *_, error, done = rest.lines
    assert done == "data: [DONE]", rest.lines[-3:]
    failure = json.loads(error.removeprefix("data: "))["errors"][0]
    assert failure["code"] == 3040, failure
    assert "replica 1 was killed by signal 9 while serving" in failure["message"], failure
    assert log.count("replica 1: starting (") == 1, log[-3000:]
    assert "not restarted: the pool is shutting down" in log, log[-3000:]
    assert "restarting in" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
