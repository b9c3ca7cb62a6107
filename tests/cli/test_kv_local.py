"""``ember kv key|bulk --local`` against a real ``ember dev``: the same SQLite state, before the
server starts and while it runs, and the same limits as the worker's ``env.KV``."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.devprocess import ROOT, DevProcess

WORKER = """
import json
from urllib.parse import urlsplit

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        key = urlsplit(request.url).path.lstrip("/")
        if request.method == "PUT":
            await self.env.KV.put(key, await request.text())
            return Response("stored")
        value = await self.env.KV.get_with_metadata(key)
        return Response(json.dumps({"value": value.value, "metadata": value.metadata}))
"""
CONFIG = "name: kvapp\nmain: worker.py\nkv_namespaces:\n  - binding: KV\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "kvapp"
    root.mkdir()
    (root / "worker.py").write_text(WORKER)
    (root / "ember.yaml").write_text(CONFIG)
    return root


def ember(
    cwd: Path, *args: str, ok: bool = True, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``python -m ember ARGS`` in ``cwd``, as a person would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if ok:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def read(url: str, key: str) -> dict[str, object]:
    return httpx.get(f"{url}/{key}", timeout=10).json()  # type: ignore[no-any-return]


def test_keys_put_before_dev_starts_are_served_by_it(project: Path) -> None:
    # No flag and no --persist-to: the default location is ember dev's default state directory.
    put = ember(project, "kv", "key", "put", "greeting", "hello", "--binding", "KV",
                "--metadata", '{"lang": "en"}')  # fmt: skip
    assert put.stdout.splitlines()[0] == "Resource location: local"
    assert (
        'Writing the value "hello" to key "greeting" on namespace binding: "KV" (id: "KV") '
        'with metadata "{"lang":"en"}".'
    ) in put.stdout
    (project / "bulk.json").write_text(
        json.dumps([{"key": "a", "value": "1"}, {"key": "b", "value": "aGk=", "base64": True}])
    )
    assert ember(project, "kv", "bulk", "put", "bulk.json", "--binding", "KV").stdout.endswith(
        "Success!\n"
    )
    with DevProcess(project) as dev:
        assert read(dev.url, "greeting") == {"value": "hello", "metadata": {"lang": "en"}}
        assert read(dev.url, "b")["value"] == "hi"


def test_writes_while_dev_runs_are_seen_on_its_next_read(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    where = ["--binding", "KV", "--local", "--persist-to", str(state)]
    with DevProcess(project, state=state) as dev:
        assert read(dev.url, "k")["value"] is None
        ember(project, "kv", "key", "put", "k", "one", *where)
        assert read(dev.url, "k")["value"] == "one"
        ember(project, "kv", "key", "put", "k", "two", "--ttl", "120", *where)
        assert read(dev.url, "k")["value"] == "two"
        listed = json.loads(ember(project, "kv", "key", "list", *where).stdout)
        assert [k["name"] for k in listed] == ["k"] and listed[0]["expiration"] > time.time()

        # And the other way: what the worker writes, the CLI reads from the same file.
        assert httpx.put(f"{dev.url}/from-worker", content="w", timeout=10).text == "stored"
        assert ember(project, "kv", "key", "get", "from-worker", *where).stdout == "w"
        assert ember(project, "kv", "key", "get", "from-worker", "--text", *where).stdout == "w\n"

        keys = tmp_path / "keys.json"
        keys.write_text(json.dumps(["k", {"name": "from-worker"}, "never-written"]))
        got = json.loads(ember(project, "kv", "bulk", "get", str(keys), *where).stdout)
        assert got == {"k": {"value": "two"}, "from-worker": {"value": "w"},
                       "never-written": {"value": None}}  # fmt: skip
        ember(project, "kv", "bulk", "delete", str(keys), "--force", *where)
        assert read(dev.url, "k")["value"] is None  # its next read, no waiting
        assert read(dev.url, "from-worker")["value"] is None
        missing = ember(project, "kv", "key", "get", "k", *where, ok=False)
        assert missing.returncode == 1 and "Value not found" in missing.stderr


def _at_terminal(cwd: Path, answer: str, *args: str) -> str:
    """``python -m ember ARGS`` on a pseudo-terminal (so it asks), answering ``answer`` to its
    question; everything it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_") and k != "CI"}
    env |= {"PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    seen, answered = b"", False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(leader, answer.encode() + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=10)
    os.close(leader)
    assert answered, seen
    return seen.decode()


def test_bulk_delete_asks_at_a_terminal_and_keeps_the_keys_when_told_no(project: Path) -> None:
    ember(project, "kv", "key", "put", "keep", "me", "--binding", "KV")
    (project / "keys.json").write_text('["keep"]')
    said = _at_terminal(project, "n", "kv", "bulk", "delete", "keys.json", "--binding", "KV")
    assert 'Not deleting keys read from "keys.json".' in said
    assert ember(project, "kv", "key", "get", "keep", "--binding", "KV").stdout == "me"
    said = _at_terminal(project, "y", "kv", "bulk", "delete", "keys.json", "--binding", "KV")
    assert "Success!" in said
    assert ember(project, "kv", "key", "get", "keep", "--binding", "KV", ok=False).returncode == 1


def test_bulk_delete_without_a_terminal_goes_on_as_wranglers_does(project: Path) -> None:
    """wrangler's confirm() answers its fallback (yes) when nothing can be asked (a script,
    CI), and says so; a pipe's content is not read as an answer."""
    ember(project, "kv", "key", "put", "gone", "soon", "--binding", "KV")
    (project / "keys.json").write_text('["gone"]')
    done = ember(project, "kv", "bulk", "delete", "keys.json", "--binding", "KV", stdin="n\n")
    assert "? Are you sure you want to delete all the keys" in done.stdout
    assert "🤖 Using fallback value in non-interactive context: yes" in done.stdout
    assert ember(project, "kv", "key", "get", "gone", "--binding", "KV", ok=False).returncode == 1


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ({"key": "a"}, 'Expected an array of key-value objects but got type "object"'),
        ([{"key": "a", "value": "1"}, {"key": "b", "value": 2}],
         'The item at index 1 is {"key":"b","value":2}: "value" must be a string, found number'),
        ([{"value": "x"}], 'The item at index 0 is {"value":"x"}: "key" must be a string'),
        ([{"key": "a", "value": "x", "expiration_ttl": "soon"}],
         '"expiration_ttl" must be a number (seconds), found string'),
        ([{"key": "a", "value": "x", "base64": "yes"}], '"base64" must be true or false'),
        ([{"key": "a", "value": "x"}, {"key": "t", "value": "x", "expiration_ttl": 5}],
         "bulk item 1 (key 't'): Invalid expiration_ttl of 5. Expiration TTL must be at least 60."),
        ([{"key": "k" * 513, "value": "x"}],
         "bulk item 0 (key 'kkk"),
        ([{"key": "a", "value": "not base64!", "base64": True}],
         "bulk item 0 (key 'a'): 'value' is not valid base64"),
        ([{"key": "a", "value": "x", "metadata": {"m": "x" * 1100}}],
         "bulk item 0 (key 'a'): Metadata length of 1108 exceeds limit of 1024."),
    ],
)  # fmt: skip
def test_a_malformed_bulk_put_file_names_the_item_and_field_and_writes_nothing(
    project: Path, items: object, expected: str
) -> None:
    (project / "bulk.json").write_text(json.dumps(items))
    refused = ember(project, "kv", "bulk", "put", "bulk.json", "--binding", "KV", ok=False)
    assert refused.returncode == 1 and expected in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    listed = ember(project, "kv", "key", "list", "--binding", "KV").stdout
    assert json.loads(listed) == []  # not even the good items before the bad one


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[1, 2", '"keys.json" is not valid JSON: Expecting'),
        ('{"k": 1}', "Expected an array of strings but got:"),
        ('["a", {"key": "b"}, 3]', 'The item at index 1 is type: "object" - {"key":"b"}'),
        ('["a", ""]', "bulk item 1 (key ''): Key names must not be empty"),
    ],
)
def test_a_malformed_bulk_delete_file_is_refused_before_anything_is_deleted(
    project: Path, content: str, expected: str
) -> None:
    ember(project, "kv", "key", "put", "a", "stays", "--binding", "KV")
    (project / "keys.json").write_text(content)
    refused = ember(project, "kv", "bulk", "delete", "keys.json", "-f", "--binding", "KV", ok=False)
    assert refused.returncode == 1 and expected in refused.stderr, refused.stderr
    assert ember(project, "kv", "key", "get", "a", "--binding", "KV").stdout == "stays"


def test_key_put_refuses_what_the_binding_refuses(project: Path) -> None:
    short = ember(project, "kv", "key", "put", "k", "v", "--ttl", "5", "--binding", "KV", ok=False)
    assert "KV PUT failed: 400 Invalid expiration_ttl of 5." in short.stderr
    meta = ember(project, "kv", "key", "put", "k", "v", "--metadata", "[1]", "--binding", "KV",
                 ok=False)  # fmt: skip
    assert "--metadata must be a JSON object. Received: [1]" in meta.stderr
    both = ember(project, "kv", "key", "list", "--binding", "KV", "--local", "--remote", ok=False)
    assert both.returncode != 0 and "--local and --remote cannot be used together" in both.stderr
    unknown = ember(project, "kv", "key", "get", "k", "--binding", "NOPE", ok=False)
    assert "ember.yaml has no KV binding 'NOPE' (its KV bindings: KV)" in unknown.stderr


def test_bulk_writes_and_worker_writes_at_the_same_time_lose_nothing(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    where = ["--binding", "KV", "--persist-to", str(state)]
    with DevProcess(project, state=state) as dev:
        errors: list[str] = []

        def worker_writes() -> None:
            with httpx.Client(timeout=30) as client:
                for i in range(150):
                    reply = client.put(f"{dev.url}/w{i:03}", content=f"w{i}")
                    if reply.text != "stored":
                        errors.append(reply.text)

        writer = threading.Thread(target=worker_writes)
        writer.start()
        for batch in range(3):
            items = [{"key": f"c{batch}-{i:03}", "value": f"c{i}"} for i in range(300)]
            (tmp_path / f"b{batch}.json").write_text(json.dumps(items))
            ember(project, "kv", "bulk", "put", str(tmp_path / f"b{batch}.json"), *where)
        writer.join(60)
        assert not writer.is_alive() and errors == []
        names = {k["name"] for k in json.loads(ember(project, "kv", "key", "list", *where).stdout)}
        assert len(names) == 150 + 900
        assert (
            read(dev.url, "c2-299")["value"] == "c299" and read(dev.url, "w149")["value"] == "w149"
        )


def test_local_keys_follow_the_chosen_environment(project: Path) -> None:
    """``--env`` picks the environment's own KV binding (bindings are not inherited), so a key
    written for staging lands in staging's namespace, not the top level's."""
    (project / "ember.yaml").write_text(
        CONFIG.replace("  - binding: KV\n", "  - binding: KV\n    id: top-ns\n")
        + "env:\n  staging:\n    kv_namespaces:\n      - binding: KV\n        id: stage-ns\n"
    )
    ember(project, "kv", "key", "put", "k", "staged", "--binding", "KV", "--env", "staging")
    assert ember(project, "kv", "key", "get", "k", "--binding", "KV", "-e", "staging").stdout == (
        "staged"
    )
    top = ember(project, "kv", "key", "get", "k", "--binding", "KV", ok=False)
    assert top.returncode != 0 and "Value not found" in top.stdout + top.stderr
    listed = ember(project, "kv", "key", "list", "--namespace-id", "stage-ns").stdout
    assert [item["name"] for item in json.loads(listed)] == ["k"]
