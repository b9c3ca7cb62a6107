"""``ember secret put NAME`` without a terminal reads the value from stdin as wrangler does:
trailing whitespace trimmed (wrangler's ``trimTrailingWhitespace``, not only the newline), an
empty value accepted (wrangler accepts it) but named on stderr, and a pipe that stays open
without a value gets a note on stderr saying what the command waits for."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

ROOT = Path(__file__).resolve().parents[2]
SHOWS_SECRET = """\
from workers import Response

async def on_fetch(request, env):
    value = getattr(env, "KEY", None)
    return Response(repr(None if value is None else str(value)))
"""


def _env(serve: ServeProcess, token: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    return env | {
        "PYTHONPATH": str(ROOT),
        "EMBER_CREDENTIALS": str(home / "credentials.json"),
        "EMBER_PLATFORM": serve.url,
        "EMBER_API_TOKEN": token,
    }


def _put(env: dict[str, str], value: str | None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ember", "secret", "put", "KEY", "--name", "shows"]
    if value is None:  # stdin /dev/null, as an agent's tool runs it
        return subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
    return subprocess.run(argv, env=env, input=value, capture_output=True, text=True, timeout=120)


def test_piped_values_are_trimmed_and_an_empty_one_is_named(
    serve: ServeProcess, tmp_path: Path
) -> None:
    account, token = permanent_account(serve, "secretinput")
    with serve.api(token) as client:
        assert put_worker(client, account, "shows", SHOWS_SECRET).status_code == 200
    env = _env(serve, token, tmp_path)

    padded = _put(env, "s3cret \t \n\n")
    assert padded.returncode == 0, padded.stderr
    assert "empty" not in padded.stderr
    assert serve.worker("secretinput", "shows").text == "'s3cret'"

    empty = _put(env, None)
    assert empty.returncode == 0, empty.stderr
    assert "✨ Success! Uploaded secret KEY" in empty.stdout
    assert "the value of KEY is empty" in empty.stderr, empty.stderr
    assert serve.worker("secretinput", "shows").text == "''"


def test_an_open_pipe_is_told_what_it_waits_for(serve: ServeProcess, tmp_path: Path) -> None:
    account, token = permanent_account(serve, "secretpipe")
    with serve.api(token) as client:
        assert put_worker(client, account, "shows", SHOWS_SECRET).status_code == 200
    argv = [sys.executable, "-m", "ember", "secret", "put", "KEY", "--name", "shows"]
    process = subprocess.Popen(
        argv, env=_env(serve, token, tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None and process.stdin is not None
    try:  # the note comes while stdin stays open; without it the command waits for ever
        ready, _, _ = select.select([process.stderr], [], [], 60)
        note = process.stderr.readline() if ready else ""
    finally:
        if not note:
            process.kill()
    assert "reading the value of KEY from stdin" in note, note
    process.stdin.write("later\n")
    process.stdin.close()
    assert process.wait(120) == 0
    assert serve.worker("secretpipe", "shows").text == "'later'"
