"""The compile worker's wire at its edges (review41): a job too large for a frame is the
request's 400 before it is sent, not a worker that dies and a 503 "retry" for a request that can
never succeed; a job travels as UTF-8; a frame the worker cannot take is answered, not an exit;
and an answer the server cannot read is a 503 with the worker restarted, not a 500."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.compile_client import (
    CompileJobTooLarge,
    CompileWorker,
    CompileWorkerFailed,
)
from ember.models.constrain.compile_worker import HEADER, MAX_FRAME, READY, frame
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_syntax import RegexError

FIELD = "/response_format/json_schema/schema/properties/p/pattern"


@pytest.fixture
def worker() -> Iterator[CompileWorker]:
    made = CompileWorker()
    yield made
    made.stop()


def test_a_job_past_the_frame_bound_is_refused_before_it_is_sent(worker: CompileWorker) -> None:
    # A control character is 6 bytes of JSON (\u0001) however it is encoded: 72 MB of job.
    pattern = "\x01" * 12_000_000
    with pytest.raises(CompileJobTooLarge) as caught:
        worker.compile(pattern, FIELD, search=True, length=(0, None), budget=600_000)
    refused = caught.value
    # A 400 naming the field, never a keyword a lenient compile may drop (it would loosen it).
    assert isinstance(refused, AutomatonBudgetExceeded) and isinstance(refused, InvalidRequestField)
    assert refused.field == FIELD
    assert f"at most {MAX_FRAME // 2**20} MiB" in str(refused)
    assert "72,000,0" in str(refused)  # the job's size, as counted
    assert worker.starts == 0  # refused here: no worker started, none killed


def test_an_astral_pattern_travels_as_utf8_and_is_answered_as_in_process(
    worker: CompileWorker,
) -> None:
    # 24 MB of UTF-8 (a request body under 32 MiB can carry it); ASCII escapes made it 72 MB,
    # past the worker's frame bound: the worker died and the user got a 503 "retry".
    pattern = "*" + "\U0001d538" * 6_000_000
    with pytest.raises(RegexError) as in_process:
        compile_regex(pattern, search=True, length=(0, None))
    with pytest.raises(RegexError) as remote:
        worker.compile(pattern, FIELD, search=True, length=(0, None))
    assert str(remote.value) == str(in_process.value)
    assert remote.value.pattern == pattern and worker.starts == 1


def test_a_lone_surrogate_is_refused_as_in_process(worker: CompileWorker) -> None:
    # Only Python's API can send one (a body's is refused by check_body); UTF-8 cannot hold it,
    # so it travels as its bytes (surrogatepass), there and back in the refusal, where a strict
    # encode failed with a 500. Passed before the switch to UTF-8 too (ASCII escapes).
    pattern = "^\ud800+x$"
    with pytest.raises(RegexError) as in_process:
        compile_regex(pattern, search=False, length=(0, None))
    with pytest.raises(RegexError) as remote:
        worker.compile(pattern, FIELD, search=False, length=(0, None))
    assert str(remote.value) == str(in_process.value) and remote.value.pattern == pattern


def _read_frame(stream) -> bytes:  # type: ignore[no-untyped-def]
    (size,) = HEADER.unpack(stream.read(HEADER.size))
    return stream.read(size)


def test_the_worker_answers_a_frame_past_its_bound_and_serves_the_next_job() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember.models.constrain.compile_worker", str(2**31)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        assert _read_frame(proc.stdout) == READY
        size = MAX_FRAME + 1
        proc.stdin.write(HEADER.pack(size) + b" " * size)
        proc.stdin.flush()
        answer = json.loads(_read_frame(proc.stdout))
        assert list(answer) == ["failed"] and f"{size:,} bytes" in answer["failed"]
        job = {"pattern": "^[a-c]{2}$", "search": False, "length": [0, None], "budget": None}
        proc.stdin.write(frame(json.dumps(job).encode()))
        proc.stdin.flush()
        assert list(json.loads(_read_frame(proc.stdout))) == ["automaton"]
        proc.stdin.close()
        assert proc.wait(10) == 0
        assert proc.stderr.read() == b""  # no traceback
    finally:
        proc.kill()
        proc.wait()


# Loaded by the worker process at its start (``site``, through PYTHONPATH): its automaton for
# one pattern loses its start states' bound, as a worker with a bug would send it. No pattern
# makes the real builder do that, so the fault is put into a real worker process instead.
SITECUSTOMIZE = """
import ember.models.constrain.automaton_wire as wire

_fields = wire.automaton_fields


def _corrupt(automaton):
    fields = _fields(automaton)
    if automaton.pattern == "^bad$":
        fields["start"] = [10**6]
    return fields


wire.automaton_fields = _corrupt
"""


def test_a_malformed_automaton_is_a_retry_and_the_worker_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    worker = CompileWorker()
    try:
        worker.compile("^good$", "/warm", search=False, length=(0, None))
        first = worker.pid
        with pytest.raises(CompileWorkerFailed) as caught:  # a 503, where it was a 500
            worker.compile("^bad$", FIELD, search=False, length=(0, None))
        assert "malformed" in str(caught.value) and FIELD in str(caught.value)
        assert worker.pid is None  # killed: the next job meets a fresh worker
        again = worker.compile("^ok$", "/p", search=False, length=(0, None))
        assert again.pattern == "^ok$" and worker.starts == 2 and worker.pid != first
    finally:
        worker.stop()
