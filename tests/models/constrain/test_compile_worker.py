"""The compile worker (compile_worker.py, compile_client.py): a real process that builds regex
automata for the model server, compared with the in-process build (the slow reference) on
random patterns and schemas, and its failures: a worker killed mid-job, a job past its limit."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata
from ember.models.constrain.automaton_cache import AutomatonCache
from ember.models.constrain.compile_client import (
    CompileLimits,
    CompileTimeLimit,
    CompileWorker,
    CompileWorkerFailed,
)
from ember.models.constrain.compile_worker import HEADER, READY, frame
from ember.models.constrain.regex_nfa import RegexAutomaton, compile_regex
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.schema import compile_schema
from tests.models.constrain.fixtures import automaton_accepts

# About 48,000 states and 0.1-0.2 s of CPU to build (a pattern times a length counter).
SLOW = ("^(a|b|c)*x$", True, (5, 3000))


@pytest.fixture
def worker() -> Iterator[CompileWorker]:
    made = CompileWorker()
    yield made
    made.stop()


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    atoms = ["a", "b", "c", "[a-c]", "[^ab]", ".", r"\d", "x"]
    if depth > 2 or rng.random() < 0.3:
        body = rng.choice(atoms)
    elif rng.random() < 0.5:
        body = "".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3)))
    else:
        body = "(" + "|".join(_random_pattern(rng, depth + 1) for _ in range(2)) + ")"
    quantifier = rng.choice(["", "", "*", "+", "?", f"{{{rng.randint(0, 3)},{rng.randint(3, 6)}}}"])
    if rng.random() < 0.03:
        body = "(" + body  # unbalanced: a RegexError both ways
    return body + quantifier


def _same(rebuilt: RegexAutomaton, reference: RegexAutomaton, rng: random.Random) -> None:
    assert len(rebuilt.edges) == len(reference.edges)
    assert (rebuilt.start, rebuilt.final) == (reference.start, reference.final)
    assert tuple(rebuilt.edges) == tuple(reference.edges)
    for _ in range(30):
        text = "".join(rng.choice("abcx1") for _ in range(rng.randint(0, 8)))
        assert automaton_accepts(rebuilt, text) == automaton_accepts(reference, text), text


def test_random_patterns_build_the_same_automata_or_refusals_both_ways(
    worker: CompileWorker,
) -> None:
    rng = random.Random(20261207)
    for _ in range(150):
        pattern = _random_pattern(rng)
        search = rng.random() < 0.5
        length = rng.choice([(0, None), (0, None), (2, 5), (1, None), (4, 4)])
        try:
            reference = compile_regex(pattern, search=search, length=length)
        except RegexError as refused:
            with pytest.raises(RegexError) as caught:
                worker.compile(pattern, "/p", search=search, length=length)
            assert str(caught.value) == str(refused)
            assert (caught.value.construct, caught.value.offset, caught.value.pattern) == (
                refused.construct,
                refused.offset,
                refused.pattern,
            )
            continue
        _same(worker.compile(pattern, "/p", search=search, length=length), reference, rng)


def _bounded_schema(rng: random.Random, count: int) -> dict:
    properties: dict[str, dict] = {}
    for i in range(count):
        if rng.random() < 0.5:
            low = rng.randint(-(10**6), 10**6)
            properties[f"n{i}"] = {"type": "integer", "minimum": low, "maximum": low + 999}
        else:
            pattern = f"^[a-f0-9]{{{rng.randint(10, 400)}}}-{i}$"
            properties[f"s{i}"] = {"type": "string", "pattern": pattern}
    return {"type": "object", "properties": properties, "required": list(properties)}


def test_random_schemas_are_refused_alike_and_charged_alike() -> None:
    # The budget's refusals (the keyword that crossed it, the count) are the same 400 whether
    # the automata came from the worker or were built here.
    rng = random.Random(7)
    remote = AutomatonCache()
    remote.attach_worker()
    try:
        for _ in range(12):
            schema = _bounded_schema(rng, rng.randint(1, 12))
            limit = rng.choice([2_000, 20_000, 200_000])
            outcomes = []
            for cache in (AutomatonCache(), remote, remote):  # the second: all found
                budget = Automata(limit, cache=cache)
                try:
                    compile_schema(schema, path="/s", strict=True, automata=budget)
                    outcomes.append(("ok", budget.states))
                except InvalidRequestField as refused:
                    outcomes.append(("refused", str(refused)))
            assert outcomes[0] == outcomes[1] == outcomes[2]
        assert remote.worker is not None and remote.worker.starts == 1
    finally:
        remote.detach_worker()


def test_a_worker_killed_mid_job_fails_that_job_and_the_next_one_succeeds(
    worker: CompileWorker,
) -> None:
    worker.compile("^a$", "/warm", search=False, length=(0, None))
    failed: list[BaseException] = []

    def job() -> None:
        try:
            worker.compile(SLOW[0], "/response_format/x", search=SLOW[1], length=SLOW[2])
        except BaseException as error:
            failed.append(error)

    thread = threading.Thread(target=job)
    thread.start()
    assert worker.in_flight.wait(30)
    pid = worker.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive()
    assert len(failed) == 1 and isinstance(failed[0], CompileWorkerFailed)
    assert "ended (signal 9) while compiling the pattern at /response_format/x" in str(failed[0])
    again = worker.compile("^b+$", "/p", search=False, length=(0, None))
    assert automaton_accepts(again, "bbb") and worker.starts == 2 and worker.pid != pid


def test_a_job_past_its_limit_is_refused_naming_the_field_and_the_worker_restarted() -> None:
    worker = CompileWorker(CompileLimits(job_seconds=0.01))
    try:
        worker.compile("^a$", "/warm", search=False, length=(0, None))
        first = worker.pid
        with pytest.raises(CompileTimeLimit) as caught:
            worker.compile(SLOW[0], "/tools/0/p", search=SLOW[1], length=SLOW[2])
        assert caught.value.field == "/tools/0/p"
        assert "within 0.01 s (the compile worker was stopped)" in str(caught.value)
        assert worker.pid is None  # killed, not left running the job
        if first is not None:
            with pytest.raises(ProcessLookupError):
                os.kill(first, 0)  # reaped: no orphan, no zombie
        again = worker.compile("^c$", "/p", search=False, length=(0, None))
        assert automaton_accepts(again, "c") and worker.starts == 2
    finally:
        worker.stop()


def _read_frame(stream) -> bytes:  # type: ignore[no-untyped-def]
    (size,) = HEADER.unpack(stream.read(HEADER.size))
    return stream.read(size)


def test_the_wire_is_length_prefixed_json_both_ways() -> None:
    # No pickle on the path: a job and every answer parse as JSON, read off the real process.
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember.models.constrain.compile_worker", str(2**31)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert _read_frame(proc.stdout) == READY
        for job in (
            {"pattern": "^[a-c]{2}$", "search": False, "length": [0, None]},
            {"pattern": "(a", "search": True, "length": [0, None]},
            {"pattern": 3, "search": True, "length": [0, None]},
        ):
            proc.stdin.write(frame(json.dumps(job).encode()))
            proc.stdin.flush()
            answer = json.loads(_read_frame(proc.stdout))
            assert set(answer) <= {"automaton", "refused", "failed"} and len(answer) == 1
        proc.stdin.close()
        assert proc.wait(10) == 0  # its stdin closed: it ends
    finally:
        proc.kill()
        proc.wait()


def test_the_cache_is_bounded_by_work_least_recently_used_first() -> None:
    keys = [(f"^[a-z]{{{n}}}$", False, (0, None)) for n in (30, 40, 50)]
    sizes = [compile_regex(p, search=s, length=n).work for p, s, n in keys]
    cache = AutomatonCache(capacity=sizes[0] + sizes[1] + sizes[2] - 1)
    first = cache.automaton(keys[0], "/a")
    cache.automaton(keys[1], "/b")
    assert cache.automaton(keys[0], "/a") is first  # found, and now the most recently used
    cache.automaton(keys[2], "/c")  # past the bound: the least recently used (keys[1]) goes
    assert cache.held == sizes[0] + sizes[2] <= cache.capacity
    assert cache.automaton(keys[0], "/a") is first
    too_big = AutomatonCache(capacity=sizes[0] - 1)
    too_big.automaton(keys[0], "/a")  # served, not kept
    assert too_big.held == 0
