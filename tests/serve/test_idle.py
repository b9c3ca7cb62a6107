"""Isolates start on a deployment's first request and stop after ``--idle-timeout`` without one;
the deployment stays live and the next request starts a new isolate."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.serve.conftest import BASE_CONFIG, ServeProcess, answer, permanent_account, put_worker


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def test_idle_isolates_stop_and_restart_on_demand(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path / "state", BASE_CONFIG, "--idle-timeout", "1s", "--housekeeping-interval", "0.2"
    )
    try:
        assert serve.proc is not None
        zygote_only = descendants(serve.proc.pid)
        account_id, token = permanent_account(serve, "idler")
        with serve.api(token) as api:
            assert put_worker(api, account_id, "nap", answer("awake")).status_code == 200
        assert serve.worker("idler", "nap").text.startswith("awake ")
        running = descendants(serve.proc.pid) - zygote_only
        assert running  # the isolate (and its sandbox monitor)
        deadline = time.monotonic() + 30
        while descendants(serve.proc.pid) & running:
            assert time.monotonic() < deadline, "the idle isolate was not stopped"
            time.sleep(0.1)
        assert serve.worker("idler", "nap").text.startswith("awake ")  # started again, lazily
        assert descendants(serve.proc.pid) - zygote_only - running
    finally:
        serve.stop()
