"""A live version that cannot start (its Init past the frame limit: stored by an older ember,
or edited by hand) answers a clear error, not a bare 500 with a traceback per request."""

from __future__ import annotations

from pathlib import Path

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("up")
"""


def test_a_version_whose_init_cannot_be_sent_answers_a_clear_error(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        account_id, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            assert put_worker(api, account_id, "w", WORKER).status_code == 200
        assert serve.worker("acme", "w").text == "up"
        serve.stop()
        plane = serve.plane()
        try:  # what no API accepts any more: secrets past the Init frame together
            with plane.db.transaction() as conn:
                (version_id,) = conn.execute("SELECT id FROM versions").fetchone()
                conn.executemany(
                    "INSERT INTO version_secrets VALUES (?, ?, 'secret_text', ?)",
                    [(version_id, f"S{i}", "x" * 5000) for i in range(300)],
                )
        finally:
            plane.close()
        serve.start()
        for _ in range(2):
            reply = serve.worker("acme", "w")
            assert reply.status_code == 500, reply.text
            assert "Worker failed to start" in reply.text
            assert "Traceback" not in reply.text
        log = serve.output()
        assert "Traceback" not in log and "do not fit the worker's Init frame" in log, log
    finally:
        serve.stop()
