"""The compile worker's edges (review39 #2-#4): a job past its time limit refuses the request
(a lenient compile took it for a keyword to ignore, weakening the constraint), a stopped worker
stays stopped, and a malformed automaton off the pipe is refused when it is read."""

from __future__ import annotations

import pytest

from ember.errors import ProtocolError
from ember.models.constrain.automata import Automata, AutomatonBudgetExceeded
from ember.models.constrain.automaton_cache import AutomatonCache
from ember.models.constrain.automaton_wire import _packed, automaton_fields, decode_automaton
from ember.models.constrain.compile_client import (
    CompileLimits,
    CompileTimeLimit,
    CompileWorkerStopped,
)
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.string_schema import literals_fitting
from ember.models.constrain.tool_grammars import ToolSignature, check_glm_arguments

# About 50,000 states and 0.1-0.2 s of CPU (far more than the 1 ms job limit below).
SLOW = "^(?:" + "|".join(chr(0x100 + i) for i in range(1000)) + ")*$"


@pytest.mark.parametrize("how", ["enum", "anyOf"])
def test_a_pattern_past_the_job_limit_refuses_the_request(how: str) -> None:
    cache = AutomatonCache()
    cache.attach_worker(CompileLimits(job_seconds=0.001))
    try:
        string = {"type": "string", "pattern": SLOW, "maxLength": 25}
        with pytest.raises(CompileTimeLimit) as caught:
            if how == "enum":  # the pattern filters the values: it was ignored, "plain" let in
                schema = {**string, "enum": ["plain", "\u0100\u0101"]}
                literals_fitting(schema["enum"], schema, "/s", Automata(cache=cache))
            else:  # lenient: an alternative left out as if it contradicted its siblings
                schema = {"anyOf": [string, {"type": "integer"}], "maxLength": 30}
                compile_schema(schema, path="/s", strict=False, automata=Automata(cache=cache))
        assert isinstance(caught.value, AutomatonBudgetExceeded)
        assert caught.value.field.endswith("/pattern")
    finally:
        cache.detach_worker()


def test_a_stopped_worker_refuses_and_starts_no_process() -> None:
    cache = AutomatonCache()
    cache.attach_worker()
    worker = cache.worker
    assert worker is not None
    worker.compile("^a$", "/a", search=False, length=(0, None))
    # A thread that took the worker before the last detach asks it after.
    cache.detach_worker()
    with pytest.raises(CompileWorkerStopped):
        worker.compile("^b$", "/b", search=False, length=(0, None))
    assert worker.pid is None and worker.starts == 1
    # The cache builds in this process meanwhile.
    assert cache.automaton(("^b$", False, (0, None)), "/b").final >= 0


@pytest.mark.parametrize(
    "offsets, flat",
    [
        ([0, 1, 2], [0, 0]),  # odd: a row would read a target-set index as a charset index
        ([0, 2, 0, 2], [0, 0]),  # decreasing: a row would run backwards
        ([2, 2, 2], [0, 0]),  # not starting at 0
    ],
)
def test_malformed_row_offsets_are_refused_when_read(offsets: list[int], flat: list[int]) -> None:
    good = automaton_fields(compile_regex("^[a-z]{2,4}$"))
    fields = {
        **good,
        "start": [0],
        "final": 1,
        "charsets": [[97, 97]],
        "offsets": _packed(offsets),
        "flat": _packed(flat),
        "set_offsets": _packed([0, 1]),
        "set_flat": _packed([1]),
    }
    with pytest.raises(ProtocolError, match="malformed automaton"):
        decode_automaton(fields)


def test_glms_check_refuses_at_the_first_time_limit_not_the_second() -> None:
    # Its first pass (the JSON compile, to reuse its automata) caught the time limit as a
    # refusal for parsing to name, and its own compile then waited out the limit again.
    cache = AutomatonCache()
    cache.attach_worker(CompileLimits(job_seconds=0.001))
    try:
        parameters = {"type": "object", "properties": {"s": {"type": "string", "pattern": SLOW}}}
        tool = ToolSignature("f", parameters, strict=True)
        with pytest.raises(CompileTimeLimit):
            check_glm_arguments(tool, "/tools/0/function/parameters", Automata(cache=cache))
        worker = cache.worker
        assert worker is not None and worker.starts == 1  # one job timed out, not two
    finally:
        cache.detach_worker()
