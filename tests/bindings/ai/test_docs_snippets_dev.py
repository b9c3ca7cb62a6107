"""Workers AI's own documented snippets, run against a real ``ember dev`` (the tiny GLM).

Each test is one snippet from developers.cloudflare.com (workers-ai, ai-gateway) that broke on
ember: the REST batch with ``?queueRequest=true``, a batch queued on one side and polled on the
other, keyword arguments to ``env.AI.run`` (as Pyodide passes them), the AI Gateway methods of
the binding, notes for misplaced options, LoRA on a LoRA-capable id, and the error wordings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from tests.bindings.ai.dev_support import DevServer, run_dev
from tests.bindings.ai.support import GLM, SMALL_SERVER, models_section, tiny_checkpoints

LORA_ID = "@cf/mistral/mistral-7b-instruct-v0.2-lora"
# {"call": [args...], "kw": {...}} -> env.AI.run(*call, **kw); "gateway": [id, method, args]
# -> env.AI.gateway(id).<method>(*args); "method": [name, args] -> env.AI.<name>(*args).
WORKER = """
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        ask = await request.json()
        ai = self.env.AI
        try:
            if "gateway" in ask:
                gateway_id, method, args = ask["gateway"]
                result = await getattr(ai.gateway(gateway_id), method)(*args)
            elif "method" in ask:
                name, args = ask["method"]
                result = await getattr(ai, name)(*args)
            else:
                result = await ai.run(*ask["call"], **ask.get("kw", {}))
        except Exception as error:
            return Response.json({
                "ok": False, "type": type(error).__name__, "message": str(error),
                "code": getattr(error, "code", None),
            })
        return Response.json({"ok": True, "result": result, "log_id": ai.aiGatewayLogId})
"""
HI = {"prompt": "hi", "max_tokens": 3}


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("docs-snippets")
    (root / "worker.py").write_text(WORKER)
    models = models_section(glm)
    models[LORA_ID] = {"checkpoint": str(glm), "args": SMALL_SERVER}
    config = {"name": "docs", "main": "worker.py", "ai": {"binding": "AI", "models": models}}
    (root / "ember.yaml").write_text(yaml.safe_dump(config))
    yield from run_dev(root)


def worker(dev: DevServer, **ask: Any) -> dict[str, Any]:
    answer = httpx.post(dev.url + "/", json=ask, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def rest(dev: DevServer, model: str, body: Any, query: str = "") -> httpx.Response:
    url = f"{dev.url}/client/v4/accounts/acct/ai/run/{model}{query}"
    return httpx.post(url, json=body, timeout=120)


def poll_rest(dev: DevServer, request_id: str) -> dict[str, Any]:
    for _ in range(600):
        answer = rest(dev, GLM, {"request_id": request_id})
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()["result"]
        if "responses" in result:
            return result
        time.sleep(0.1)
    raise AssertionError("the batch never finished")


def test_rest_batch_with_the_query_parameter_is_queued(dev: DevServer) -> None:
    # batch-api/rest-api.mdx: curl .../ai/run/<model>?queueRequest=true --json '{"requests":...}'
    batch = {"requests": [{**HI, "external_reference": "r1"}]}
    answer = rest(dev, GLM, batch, "?queueRequest=true")
    assert answer.status_code == 200, answer.text
    queued = answer.json()["result"]
    assert queued["status"] == "queued" and queued["request_id"]
    done = poll_rest(dev, queued["request_id"])
    assert done["responses"][0]["external_reference"] == "r1"


def test_a_batch_queued_over_rest_is_polled_from_the_binding_and_back(dev: DevServer) -> None:
    queued = rest(dev, GLM, {"requests": [HI], "options": {"queueRequest": True}}).json()["result"]
    polled = worker(dev, call=[GLM, {"request_id": queued["request_id"]}])
    assert polled["ok"], polled  # was 5006 "no queued request ... for this account"
    from_worker = worker(dev, call=[GLM, {"requests": [HI]}, {"queueRequest": True}])
    assert from_worker["ok"], from_worker
    assert "responses" in poll_rest(dev, from_worker["result"]["request_id"])


def test_keyword_arguments_are_what_pyodide_passes(dev: DevServer) -> None:
    # Pyodide gathers a JS function's keyword arguments into one object, the last argument.
    only_model = worker(dev, call=[GLM], kw={"prompt": "hi", "max_tokens": 2})
    assert only_model["ok"], only_model  # the keywords are the inputs
    assert only_model["result"]["usage"]["completion_tokens"] == 2
    with_inputs = worker(dev, call=[GLM, HI], kw={"gateway": {"id": "kw-gw"}})
    assert with_inputs["ok"] and with_inputs["log_id"], with_inputs  # the keywords are options
    past_options = worker(dev, call=[GLM, HI, {}], kw={"max_tokens": 1})
    assert past_options["ok"], past_options  # a fourth argument: JavaScript ignores it
    assert past_options["result"]["usage"]["completion_tokens"] == 3


def test_gateway_log_id_and_the_gateway_methods(dev: DevServer) -> None:
    options = {"gateway": {"id": "my-gateway", "collectLog": True, "metadata": {"user": "123"}}}
    ran = worker(dev, call=[GLM, HI, options])
    assert ran["ok"], ran
    log_id = ran["log_id"]
    assert isinstance(log_id, str) and log_id
    log = worker(dev, gateway=["my-gateway", "getLog", [log_id]])
    assert log["ok"], log
    entry = log["result"]
    assert entry["id"] == log_id and entry["model"] == GLM and entry["provider"] == "workers-ai"
    assert entry["success"] is True and entry["status_code"] == 200 and entry["cached"] is False
    assert entry["tokens_out"] == 3 and entry["metadata"] == {"user": "123"}
    assert entry["request_size"] > 0 and entry["response_size"] > 0
    patched = worker(
        dev, gateway=["my-gateway", "patchLog", [log_id, {"feedback": 1, "score": 100}]]
    )
    assert patched["ok"] and patched["result"] is None, patched
    again = worker(dev, gateway=["my-gateway", "getLog", [log_id]])["result"]
    assert again["feedback"] == 1 and again["score"] == 100
    other = worker(dev, gateway=["another-gateway", "getLog", [log_id]])
    assert not other["ok"] and other["type"] == "AiGatewayLogNotFound", other
    url = worker(dev, gateway=["my-gateway", "getUrl", []])
    assert url["ok"] and url["result"].startswith("https://gateway.ai.cloudflare.com/v1/"), url
    assert url["result"].endswith("/my-gateway")
    openai_url = worker(dev, gateway=["my-gateway", "getUrl", ["openai"]])["result"]
    assert openai_url == url["result"] + "/openai"


@pytest.mark.parametrize(
    ("ask", "offered"),
    [
        ({"method": ["toMarkdown", [[]]]}, "toMarkdown"),
        ({"method": ["autorag", ["my-rag"]]}, "AutoRAG"),
        ({"method": ["aiSearch", ["my-rag"]]}, "AI Search"),
        ({"gateway": ["g", "run", [{"provider": "openai", "endpoint": "chat", "query": {}}]]},
         "env.AI.run"),
    ],
)  # fmt: skip
def test_what_ember_cannot_serve_says_what_it_offers(
    dev: DevServer, ask: dict[str, Any], offered: str
) -> None:
    answer = worker(dev, **ask)
    assert not answer["ok"] and answer["type"] != "AttributeError", answer
    assert offered in answer["message"] and "ember" in answer["message"]


def test_unknown_and_misplaced_options_get_a_dev_console_note(dev: DevServer) -> None:
    seen = len(dev.lines)
    assert worker(dev, call=[GLM, HI, {"rejectifbusy": True}])["ok"]
    assert worker(dev, call=[GLM, {**HI, "rejectIfBusy": True}])["ok"]
    notes = "\n".join(dev.lines[seen:])
    assert "'rejectifbusy' (did you mean 'rejectIfBusy'?)" in notes, notes
    assert "'rejectIfBusy'" in notes and "third argument" in notes, notes


def test_lora_on_a_lora_capable_id_says_ember_serves_no_adapters(dev: DevServer) -> None:
    inputs = {"prompt": "Hello", "raw": True, "lora": "cf-public-magicoder", "max_tokens": 2}
    answer = worker(dev, call=[LORA_ID, inputs])
    assert not answer["ok"]
    assert "does not support LoRa" not in answer["message"], answer
    assert "ember serves no LoRA adapters" in answer["message"], answer


def test_rest_error_wordings(dev: DevServer) -> None:
    empty = httpx.post(f"{dev.url}/client/v4/accounts/acct/ai/run/{GLM}", timeout=30)
    assert empty.status_code == 400
    assert empty.json()["errors"][0]["code"] == 3003, empty.text
    assert "Request is missing headers or body" in empty.json()["errors"][0]["message"]
    typo = rest(dev, GLM, {"message": [{"role": "user", "content": "hi"}]})
    assert "did you mean 'messages'" in typo.json()["errors"][0]["message"], typo.text
    no_at = rest(dev, GLM.removeprefix("@"), {"prompt": "x"})
    error = no_at.json()["errors"][0]
    assert error["code"] == 5007 and f"'{GLM}'" in error["message"], no_at.text
