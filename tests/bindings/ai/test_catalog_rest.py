"""The catalog routes the cloudflare SDK calls (``ai.models.schema.get``, ``ai.authors.list``,
``ai.tasks.list``) on a real ``ember dev``, and the schemas held against the request parser."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from cloudflare import BadRequestError, Cloudflare

from ember.bindings.ai.io_schema import input_schema, model_io_schema
from ember.errors import InvalidModelInput
from ember.models.api.chat_request import parse_sampling
from tests.bindings.ai.dev_support import HI_WORKER, DevServer, run_dev
from tests.bindings.ai.support import GLM, models_section, tiny_checkpoints

LLAMA = "@cf/meta/llama-3.1-8b-instruct"  # a classic id, mapped to the tiny GLM


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("catalog")
    (root / "worker.py").write_text(HI_WORKER)
    models = models_section(glm)
    models[LLAMA] = dict(models[GLM])
    config = {"name": "catalog", "main": "worker.py", "ai": {"binding": "AI", "models": models}}
    (root / "ember.yaml").write_text(yaml.safe_dump(config))
    yield from run_dev(root)


def _sdk(dev: DevServer) -> Cloudflare:
    return Cloudflare(api_token="unused", base_url=dev.url + "/client/v4", max_retries=0)


def test_the_sdk_reads_each_models_schema_in_the_shape_it_answers(dev: DevServer) -> None:
    sdk = _sdk(dev)
    chat = sdk.ai.models.schema.get(account_id="local", model=GLM)
    classic = sdk.ai.models.schema.get(account_id="local", model=LLAMA)
    for found in (chat, classic):  # the SDK's SchemaGetResponse fields
        assert found.input.type == "object" and found.input.additional_properties is True
        assert found.output.type == "object" and found.input.description
    # A request the docs show validates against the schema the id answers in...
    ask = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}
    jsonschema.validate(ask, chat.input.model_dump(by_alias=True))
    jsonschema.validate({"prompt": "hi", "raw": True}, classic.input.model_dump(by_alias=True))
    # ...and each answer validates against its output schema.
    answer = httpx.post(f"{dev.url}/client/v4/accounts/local/ai/run/{LLAMA}", json=ask, timeout=120)
    result = answer.json()["result"]
    assert "response" in result
    jsonschema.validate(result, classic.output.model_dump(by_alias=True))
    with pytest.raises(jsonschema.ValidationError):  # the classic answer is no chat.completion
        jsonschema.validate(
            result, chat.output.model_dump(by_alias=True)["oneOf"][0] | {"required": ["choices"]}
        )


def test_schema_errors_name_what_was_wrong(dev: DevServer) -> None:
    sdk = _sdk(dev)
    with pytest.raises(BadRequestError) as unknown:
        sdk.ai.models.schema.get(account_id="local", model="@cf/nobody/nothing")
    assert "5007" in str(unknown.value) and GLM in str(unknown.value)
    missing = httpx.get(f"{dev.url}/client/v4/accounts/local/ai/models/schema", timeout=30)
    assert missing.status_code == 400 and missing.json()["success"] is False
    assert "model" in missing.json()["errors"][0]["message"]


def test_authors_and_tasks_list_what_is_served(dev: DevServer) -> None:
    sdk = _sdk(dev)
    authors = list(sdk.ai.authors.list(account_id="local"))
    listed = [m["id"] for m in httpx.get(dev.url + "/ai/v1/models", timeout=30).json()["data"]]
    assert [a["id"] for a in authors] == sorted({m.split("/")[1] for m in listed})
    assert "meta" in [a["id"] for a in authors]
    by_id = {a["id"]: a for a in authors}
    assert GLM in by_id["zai-org"]["description"] and LLAMA in by_id["meta"]["description"]
    tasks = list(sdk.ai.tasks.list(account_id="local"))
    assert [t["name"] for t in tasks] == ["Text Generation"]


def _bounds(schema: dict[str, Any]) -> Iterator[tuple[str, float, bool]]:
    """(field, value, inside) at and just past every numeric bound of the Messages form."""
    properties = schema["oneOf"][1]["properties"]
    for name, spec in properties.items():
        if spec.get("type") not in ("number", "integer"):
            continue
        step = 1 if spec["type"] == "integer" else 1e-6
        low, high = spec.get("minimum"), spec.get("maximum")
        if low is not None:
            yield name, low + (step if "exclusiveMinimum" in spec else 0), True
            yield name, (spec.get("exclusiveMinimum", low - step)), False
        if high is not None:
            yield name, high, True
            yield name, high + step if step == 1 else math.nextafter(high, math.inf) + step, False


def _parser_takes(name: str, value: float, classic: bool) -> bool:
    body = {name: value, **({"logprobs": True} if name == "top_logprobs" else {})}
    try:
        if classic:
            from ember.bindings.ai.classic_schema import check_classic

            check_classic("@cf/meta/llama-3.1-8b-instruct", body)
        if name == "n":
            from ember.models.api.chat_request import choice_count

            choice_count(body, "")
        else:
            parse_sampling(body, max_temperature=5.0 if classic else 2.0)
    except InvalidModelInput:
        return False
    return True


@pytest.mark.parametrize("schema", ["chat-completions", "classic"])
def test_every_range_in_the_schema_is_the_parsers(schema: str) -> None:
    found = input_schema(schema)  # type: ignore[arg-type]
    checked = 0
    for name, value, inside in _bounds(found):
        ask = {"messages": [{"role": "user", "content": "hi"}], name: value}
        valid = jsonschema.Draft202012Validator(found).is_valid(ask)
        assert valid is inside, (name, value)
        assert _parser_takes(name, value, schema == "classic") is inside, (name, value)
        checked += 1
    assert checked >= 20
    # Fresh random values inside and outside every numeric range agree as well.
    rng = random.Random()
    properties = found["oneOf"][1]["properties"]
    for _ in range(200):
        name = rng.choice([n for n, s in properties.items() if "minimum" in s and "maximum" in s])
        spec = properties[name]
        span = spec["maximum"] - spec["minimum"]
        value: float = rng.uniform(spec["minimum"] - span, spec["maximum"] + span)
        if spec["type"] == "integer":
            value = int(value)
        ask = {"messages": [{"role": "user", "content": "hi"}], name: value}
        valid = jsonschema.Draft202012Validator(found).is_valid(ask)
        assert _parser_takes(name, value, schema == "classic") is valid, (name, value)


def test_the_schema_lists_every_field_the_gateway_forwards() -> None:
    from ember.bindings.ai.dialects import FORWARDED

    listed = set(model_io_schema("chat-completions")["input"]["oneOf"][1]["properties"])
    missing = set(FORWARDED) - listed - {"stream_options", "ignore_eos", "min_tokens", "user"}
    assert not missing


def test_a_context_refusal_says_the_limit_is_the_local_checkpoints(dev: DevServer) -> None:
    url = f"{dev.url}/client/v4/accounts/local/ai/run/{GLM}"
    ask = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 100_000}
    refused = httpx.post(url, json=ask, timeout=120)
    assert refused.status_code == 400, refused.text
    message = refused.json()["errors"][0]["message"]
    assert "maximum context length" in message  # the replica's own words first
    assert "limit of the local checkpoint" in message and "131072" in message
    assert f'ai.models."{GLM}".args' in message
