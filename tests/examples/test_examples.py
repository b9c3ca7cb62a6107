"""Every example runs under the real ``ember dev`` and does what its README row says."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.cli.devprocess import ROOT, DevProcess

EXAMPLES = ROOT / "examples"


def test_every_example_directory_is_tested() -> None:
    tested = {"hello", "kv-counter", "cron", "streaming", "cf-python-worker", "fastapi"}
    present = {p.name for p in EXAMPLES.iterdir() if p.is_dir()}
    # Examples owned by other parts of ember (e.g. the AI ones) are tested with those parts.
    assert tested <= present


def test_hello(tmp_path: Path) -> None:
    with DevProcess(EXAMPLES / "hello", state=tmp_path) as dev:
        assert httpx.get(dev.url).text == "Hello, world!"
        assert httpx.get(f"{dev.url}/json").json() == {"greeting": "Hello", "method": "GET"}


def test_kv_counter_keeps_counts_across_restarts(tmp_path: Path) -> None:
    with DevProcess(EXAMPLES / "kv-counter", state=tmp_path) as dev:
        assert httpx.get(f"{dev.url}/a").text == "/a has been visited 1 time(s)\n"
        assert httpx.get(f"{dev.url}/a").text == "/a has been visited 2 time(s)\n"
        httpx.get(f"{dev.url}/b")
    with DevProcess(EXAMPLES / "kv-counter", state=tmp_path) as dev:
        assert httpx.get(f"{dev.url}/a").text == "/a has been visited 3 time(s)\n"
        assert httpx.get(f"{dev.url}/__counts").json() == {"/a": 3, "/b": 1}
        assert httpx.delete(f"{dev.url}/a").text == "reset\n"
        assert httpx.get(f"{dev.url}/a").text == "/a has been visited 1 time(s)\n"


def test_cron_runs_on_test_scheduled(tmp_path: Path) -> None:
    with DevProcess(EXAMPLES / "cron", "--test-scheduled", "--no-crons", state=tmp_path) as dev:
        # Two runs back to back, within KV's one write per second to a key: both are kept
        # (each run writes its own key; appending to one shared key lost the second, 429).
        for cron, time in (("*/5 * * * *", "1000"), ("0 3 * * mon", "2000")):
            ran = httpx.get(f"{dev.url}/__scheduled", params={"cron": cron, "time": time})
            assert (ran.status_code, ran.text) == (200, "Ran scheduled event\n")
        dev.wait_for_line("cron 0 3 * * mon ran (scheduled at 2000)")
        assert httpx.get(dev.url).json() == {
            "runs": [
                {"cron": "*/5 * * * *", "scheduled_time": 1000.0},
                {"cron": "0 3 * * mon", "scheduled_time": 2000.0},
            ]
        }
        # The KV error's own words ("KV PUT failed: 429 ..."), not a bare "429": the state
        # directory's path can hold it (pytest-429).
        assert not any("KV PUT failed" in line for line in dev.lines), dev.lines


def test_streaming_sends_events_as_they_are_produced(tmp_path: Path) -> None:
    with DevProcess(EXAMPLES / "streaming", state=tmp_path) as dev:
        with httpx.stream("GET", f"{dev.url}/events?n=4") as response:
            assert response.headers["content-type"] == "text/event-stream"
            started = time.monotonic()
            chunks = response.iter_text()
            first = next(chunks)
            first_at = time.monotonic() - started
            rest = "".join(chunks)
            total = time.monotonic() - started
        assert first == 'data: {"tick": 0}\n\n'
        assert rest.endswith("data: [DONE]\n\n") and rest.count("data:") == 4
        assert first_at < total  # the first event came before the stream ended


def test_cloudflare_python_worker_runs_unchanged(tmp_path: Path) -> None:
    with DevProcess(EXAMPLES / "cf-python-worker", state=tmp_path) as dev:
        assert httpx.get(dev.url).json() == {"version": "v1", "routes": ["/notes/<name>"]}
        stored = httpx.put(f"{dev.url}/notes/todo", content="buy milk")
        assert (stored.status_code, stored.text) == (201, "stored")
        assert httpx.get(f"{dev.url}/notes/todo").text == "buy milk"
        assert httpx.get(f"{dev.url}/notes/none").status_code == 404
        redirect = httpx.get(f"{dev.url}/elsewhere")
        assert redirect.status_code == 302 and redirect.headers["location"].endswith("/")


def test_fastapi_app_through_asgi(tmp_path: Path) -> None:
    with DevProcess(EXAMPLES / "fastapi", state=tmp_path) as dev:
        assert httpx.get(dev.url).json() == {"message": "Hello from FastAPI on ember"}
        note = {"title": "milk", "body": "two litres", "tags": ["shop"]}
        stored = httpx.put(f"{dev.url}/notes/todo", json=note)
        assert (stored.status_code, stored.json()) == (201, {"stored": "todo"})
        assert httpx.get(f"{dev.url}/notes/todo").json() == note
        assert httpx.get(f"{dev.url}/notes").json() == {"names": ["todo"]}
        missing = httpx.get(f"{dev.url}/notes/none")
        assert (missing.status_code, missing.json()) == (404, {"detail": "no note named 'none'"})
        invalid = httpx.put(f"{dev.url}/notes/bad", json={"title": ""})
        assert invalid.status_code == 422
        assert invalid.json()["detail"][0]["loc"] == ["body", "title"]
        assert httpx.get(f"{dev.url}/count", params={"to": 2}).text == "data: 1\n\ndata: 2\n\n"
        assert httpx.get(f"{dev.url}/openapi.json").json()["info"]["title"] == "notes"
