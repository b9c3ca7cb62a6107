"""Bounded numbers through a real ``ember models serve`` process: sampled at temperature 1 with
several seeds, every completion parses and every bounded field is in range; and the official
openai client's ``.parse()`` with a Pydantic model whose fields carry ``Field(ge=..., le=...)``
(it was a 400: ember refused ``minimum``/``maximum``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from tests.models.server.served_process import ServedProcess, served_process

MODEL = "glm"
NO_THINKING = {"enable_thinking": False}
SCHEMA = {
    "type": "object",
    "properties": {
        "age": {"type": "integer", "minimum": 18, "maximum": 120},
        "offset": {"type": "integer", "exclusiveMinimum": -50, "exclusiveMaximum": -3},
        "count": {"type": "integer", "minimum": 1000},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "temp": {"type": "number", "exclusiveMinimum": -40.5, "exclusiveMaximum": 60.25},
    },
    "required": ["age", "offset", "count", "score", "temp"],
    "additionalProperties": False,
}


class Person(BaseModel):
    age: int = Field(ge=0, le=120)
    height: float = Field(gt=0.5, lt=2.5)


@pytest.fixture(scope="module")
def server(glm_dir: Path) -> Iterator[ServedProcess]:
    with served_process(glm_dir, MODEL, "--kv-cache-bytes", "16MiB") as served:
        yield served


@pytest.mark.parametrize("seed", range(4))
def test_sampled_bounded_fields_always_parse_and_stay_in_range(
    server: ServedProcess, seed: int
) -> None:
    reply = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "Describe a person as JSON."}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": SCHEMA, "strict": True},
            },
            "temperature": 1.0,
            "seed": seed,
            "n": 8,
            "max_tokens": 400,
            "chat_template_kwargs": NO_THINKING,
        },
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    for choice in reply.json()["choices"]:
        assert choice["finish_reason"] == "stop", choice
        value = json.loads(choice["message"]["content"])
        jsonschema.Draft202012Validator(SCHEMA).validate(value)


@pytest.mark.parametrize("seed", range(3))
def test_openai_parse_with_pydantic_field_bounds(server: ServedProcess, seed: int) -> None:
    client = openai.OpenAI(
        base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300
    )
    completion = client.chat.completions.parse(
        model=MODEL,
        messages=[{"role": "user", "content": "A person, please."}],
        response_format=Person,
        temperature=1.0,
        seed=seed,
        n=4,
        max_tokens=300,
        extra_body={"chat_template_kwargs": NO_THINKING},
    )
    for choice in completion.choices:
        person = choice.message.parsed
        assert isinstance(person, Person), choice.message.content  # Pydantic validated it
        assert 0 <= person.age <= 120 and 0.5 < person.height < 2.5
