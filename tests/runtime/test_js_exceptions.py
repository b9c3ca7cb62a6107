"""Binding failures reach a handler as Pyodide's ``JsException``, as on Python Workers.

On the platform every binding is a JavaScript object, so a failed ``await env.KV.put(...)`` or
``await env.AI.run(...)`` raises ``pyodide.ffi.JsException`` in Python (with the JS error's
``name`` and ``message``), and handlers written for it catch that class. ember's own classes
(``InferenceUpstreamError``, ``BindingError``...) stay what they are and are JsExceptions too;
an argument of the wrong type is both a ``TypeError`` and a JsException named ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runtime.harness import Harness, write_project

WORKER = """
from pyodide.ffi import JsException
from workers import Response

async def on_fetch(request, env):
    case = request.url.split("/")[-1]
    try:
        if case == "ai":
            await env.AI.run("@cf/nobody/no-such-model", {"prompt": "hi"})
        elif case == "kv_key":
            await env.KV.put("k" * 600, "v")
        elif case == "kv_type":
            await env.KV.put("k", 42)
        else:
            return Response("no case", status=404)
    except JsException as error:
        return Response.json({
            "caught": "JsException",
            "class": type(error).__name__,
            "name": error.name,
            "error_name": getattr(error, "error_name", None),
            "message": error.message,
            "str": str(error),
            "is_type_error": isinstance(error, TypeError),
        })
    return Response("no error", status=500)
"""

CONFIG = "ai:\n  binding: AI\nkv_namespaces:\n  - binding: KV\n    id: ns\n"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator:  # noqa: ANN201
    root = tmp_path_factory.mktemp("jsexc")
    harness = Harness(root / "state")
    try:
        project = write_project(root / "project", WORKER, CONFIG)
        with harness.client(harness.deploy(project)) as client:
            yield client
    finally:
        harness.close()


def test_an_ai_error_is_caught_as_js_exception_with_its_name(client) -> None:  # noqa: ANN001
    got = client.get("/ai").json()
    assert got["class"] == "InferenceUpstreamError"
    # workerd: ``new InferenceUpstreamError(message, name)`` sets ``error.name`` to the backend's
    # ``name`` field (ai-api.ts), which Pyodide passes on as JsException.name.
    assert got["name"] == got["error_name"] and got["name"] not in ("", "Error")
    assert got["message"].startswith("5007: ") and got["str"] == got["message"]
    assert got["is_type_error"] is False


def test_a_refused_kv_write_is_caught_as_js_exception(client) -> None:  # noqa: ANN001
    got = client.get("/kv_key").json()
    assert got["caught"] == "JsException" and got["name"] == "Error"
    assert "512" in got["message"], got  # the key-length limit is named


def test_a_wrong_argument_type_is_a_type_error_and_a_js_exception(client) -> None:  # noqa: ANN001
    got = client.get("/kv_type").json()
    assert got["name"] == "TypeError" and got["is_type_error"] is True, got


def test_ember_error_classes_keep_their_place_in_the_tree() -> None:
    from ember.bindings.ai.client import InferenceUpstreamError
    from ember.errors import BindingError, LimitExceeded, UserError
    from ember.js_errors import JsException

    for cls in (BindingError, LimitExceeded, InferenceUpstreamError):
        assert issubclass(cls, UserError) and issubclass(cls, JsException)
    assert InferenceUpstreamError("5007: x", code=5007).message == "5007: x"
