"""The classic (family A) input schema's own limits, checked at the gateway.

ember's model server takes wider ranges than the classic catalog files (``top_k`` 1-50,
``top_p`` 0.001-1, ``seed`` 1-9999999999, text-only message content) and fields the classic
schema does not have (``n``, ``max_completion_tokens``). Accepted here, such a request would
work in ``ember dev`` and fail or differ once deployed, so the classic ids are held to their
schema: out-of-range values are a 5006 naming the field, and the fields the schema lacks are
dropped (the platform ignores unknown fields) with a note saying what to send instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import describe

# (field, minimum, maximum, integer?) from the classic catalog files (reference §1.4 A).
RANGES = (
    ("top_k", 1, 50, True),
    ("top_p", 0.001, 1, False),
    ("seed", 1, 9_999_999_999, True),
    ("repetition_penalty", 0, 2, False),
    ("frequency_penalty", -2, 2, False),
    ("presence_penalty", -2, 2, False),
)
NOT_CLASSIC = {
    "n": "classic models answer one response",
    "max_completion_tokens": "the classic schema's limit is max_tokens",
}


def check_classic(model: str, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``inputs`` held to the classic schema, and a note for the fields dropped (or None);
    raises InvalidRequestField for a value the classic schema refuses."""
    for name, low, high, integer in RANGES:
        value = inputs.get(name)
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (integer and not isinstance(value, int)) or not low <= value <= high:
            kind = "an integer" if integer else "a number"
            raise InvalidRequestField(f"/{name}", f"{kind} from {low} to {high}", describe(value))
    messages = inputs.get("messages")
    if isinstance(messages, list):
        for index, message in enumerate(messages):
            content = message.get("content") if isinstance(message, Mapping) else None
            if content is not None and not isinstance(content, str):
                raise InvalidRequestField(
                    f"/messages/{index}/content",
                    "a string (the classic schema's messages carry text only: Type mismatch)",
                    describe(content),
                )
    dropped = [name for name in NOT_CLASSIC if name in inputs]
    if not dropped:
        return dict(inputs), None
    kept = {key: value for key, value in inputs.items() if key not in NOT_CLASSIC}
    reasons = "; ".join(f"'{name}': {NOT_CLASSIC[name]}" for name in dropped)
    return kept, f"{model}: ignored {reasons} (not in the classic schema; the platform ignores it)"
