"""``response_format.json_schema.strict: false`` is OpenAI's "the schema is a hint": a keyword
ember cannot enforce (``uniqueItems``) is accepted and ignored, as for tool parameters, and the
rest of the schema still holds; ``strict: true``, or no ``strict`` at all, refuses it with a 400
naming the keyword (review26 L5: ``strict`` was parsed and never read)."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.constraints import constraint_for
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.session import build_root
from tests.models.constrain.fixtures import grammar_accepts

SCHEMA = {
    "type": "object",
    "properties": {"tags": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}},
    "required": ["tags"],
    "additionalProperties": False,
}


def _body(**json_schema: object) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "t", **json_schema}},
    }


@pytest.mark.parametrize("strict", [{"strict": True}, {}], ids=["strict", "unsaid"])
def test_strict_or_unsaid_refuses_what_ember_cannot_enforce(strict: dict) -> None:
    with pytest.raises(InvalidRequestField) as refused:
        parse_chat_request(_body(schema=SCHEMA, **strict))
    assert refused.value.field == "/response_format/json_schema/schema/properties/tags/uniqueItems"


def _accepts(text: str) -> bool:
    request = parse_chat_request(_body(schema=SCHEMA, strict=False))
    spec = constraint_for(request, tool_format="glm47", reasoning="off")
    assert spec is not None and not spec.schema_strict
    return grammar_accepts(build_root(spec, {}), text)


def test_strict_false_accepts_and_still_enforces_the_rest() -> None:
    assert _accepts('{"tags":[1,1]}')  # uniqueItems is the part not enforced
    assert not _accepts('{"tags":["a"]}')  # item type still holds
    assert not _accepts("{}")  # required still holds
