"""What every answer to a hostile request must look like, and the canary that must not notice.

``check_answer`` returns the broken invariants (empty when the answer is fine): a 200 (a
stream that ends with ``[DONE]`` or an error event, a body that is strict JSON) or a 4xx with
OpenAI's error object, whose ``param`` names a field when the body was a JSON object; never a
5xx. The canary is a small, valid chat completion sent at the same time on its own connection.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.strategies import SearchStrategy

from tests.models.server.fuzz_bodies import Hostile

T = TypeVar("T")

# An answer must arrive within this long; a hang is a failure, not a slow test.
CLIENT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
# Errors about the body as a whole, not about one field: these have no ``param``.
BODY_LEVEL = (
    "parse the JSON body",
    "body is empty",
    "Unsupported Media Type",
    "JSON object",
    "bytes; at most",
    "nested too deeply",  # how deep a parser gets depends on its thread's stack: body-level
)


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: NaN and Infinity are not JSON (a browser's JSON.parse fails)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def _error_problems(response: httpx.Response, hostile: Hostile) -> list[str]:
    try:
        error = strict_json(response.text)["error"]
    except (ValueError, KeyError, TypeError) as exc:
        return [f"a {response.status_code} without an OpenAI error object ({exc})"]
    problems = []
    if set(error) != {"message", "type", "param", "code"} or not error["message"]:
        problems.append(f"malformed error object {error}")
    message = str(error.get("message", ""))
    body_level = any(words in message for words in BODY_LEVEL)
    # A field is named by ``param`` or, for a rule about several fields, quoted in the message.
    quoted = re.search(r"['`][A-Za-z_][\w.\[\]/]*['`]", message)
    if hostile.mutated != ("",) and not body_level and not error.get("param") and not quoted:
        problems.append(f"the error names no field: {error}")
    return problems


def raw_events(data: bytes) -> list[str]:
    """The ``data:`` payloads of an event stream, as text (``parse_sse`` is lax about NaN)."""
    events = []
    for block in data.decode("utf-8").split("\n\n"):
        lines = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if lines:
            events.append("\n".join(lines))
    return events


def _stream_problems(response: httpx.Response) -> list[str]:
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return ["a stream answered without text/event-stream"]
    try:
        events = [strict_json(e) if e != "[DONE]" else e for e in raw_events(response.content)]
    except ValueError as exc:
        return [f"an unparseable event stream ({exc})"]
    if not events:
        return ["an empty event stream"]
    if events[-1] == "[DONE]":
        errors = [e for e in events[:-1] if isinstance(e, dict) and "error" in e]
        return [f"a stream with an error event mid-way: {errors[0]}"] if errors else []
    if isinstance(events[-1], dict) and "error" in events[-1]:
        error = events[-1]["error"]
        if "engine loop failed" in str(error) or error.get("type") == "server_error":
            return [f"a stream ended by a server error: {error}"]
        return []
    return [f"a stream that ends without [DONE] or an error: {events[-1]!r}"]


def check_answer(response: httpx.Response, hostile: Hostile) -> list[str]:
    status = response.status_code
    if status >= 500 or status < 200 or 200 < status < 400:
        return [f"status {status}: {response.text[:500]}"]
    if status >= 400:
        return _error_problems(response, hostile)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return _stream_problems(response)
    try:
        strict_json(response.text)
    except ValueError as exc:
        return [f"a 200 whose body is not strict JSON ({exc}): {response.text[:300]}"]
    return []


CANARY = {
    "model": "fuzz",
    "messages": [{"role": "user", "content": "Say hi"}],
    "max_tokens": 3,
    "temperature": 0,
    # Thinking off: the three tokens come back as content, not reasoning.
    "chat_template_kwargs": {"enable_thinking": False},
}


def canary_problems(client: httpx.Client, url: str) -> list[str]:
    """A well-formed chat completion: it must succeed with the usual shape, whatever else is in."""
    response = client.post(url + "/v1/chat/completions", json=CANARY, timeout=CLIENT_TIMEOUT)
    if response.status_code != 200:
        return [f"canary got {response.status_code}: {response.text[:300]}"]
    body = response.json()
    choice = body["choices"][0]
    if not isinstance(choice["message"]["content"], str) or choice["finish_reason"] not in (
        "stop",
        "length",
    ):
        return [f"canary answer has an odd shape: {body}"]
    if not 1 <= body["usage"]["completion_tokens"] <= 3:
        return [f"canary usage is off: {body['usage']}"]
    return []


def fuzz_beside_a_canary(
    strategy: SearchStrategy[T],
    send: Callable[[httpx.Client, T], list[str]],
    canary: Callable[[httpx.Client], list[str]],
    describe: Callable[[T], str],
    *,
    examples: int,
    seed_value: int | None,
    after_each: Callable[[], list[str]] = lambda: [],
) -> list[str]:
    """Send each example ``strategy`` draws while a well-formed canary runs beside it (each on
    its own connection); every problem found, named by the example that caused it. Without
    ``seed_value`` the examples are CI's fixed ones (derandomized); no shrinking, so a body is
    reported exactly as it was sent."""
    problems: list[str] = []
    pool = ThreadPoolExecutor(2)
    fuzz_client, canary_client = httpx.Client(), httpx.Client()

    @settings(
        max_examples=examples,
        derandomize=seed_value is None,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(example=strategy)
    def run(example: T) -> None:
        answer = pool.submit(send, fuzz_client, example)
        beside = pool.submit(canary, canary_client)
        found = answer.result() + beside.result() + after_each()
        problems.extend(f"{describe(example)}\n    -> {p}" for p in found)

    if seed_value is not None:
        run = seed(seed_value)(run)
    try:
        run()
    finally:
        pool.shutdown()
        fuzz_client.close()
        canary_client.close()
    return problems
