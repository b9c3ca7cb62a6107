"""vLLM's and SGLang's structured-output fields beyond the plain regex, on ``/v1/chat/completions``
and ``/v1/completions``: mapped onto what ember enforces, or refused by name. A field that came
back ignored would hand the client free text it believes constrained, so none is ignored.

Mapped (vLLM's older ``guided_*`` and its current ``structured_outputs.*``):
- ``guided_choice`` / ``structured_outputs.choice``: a regex of the escaped alternatives, so
  the output is exactly one of them (``regex_fields``, one regex per request);
- ``guided_json`` / ``structured_outputs.json`` (a schema, or its JSON text): ``response_format``
  json_schema; ``structured_outputs.json_object``: json_object.

Refused with a 400 that names the field and what ember supports: grammars (vLLM's
``guided_grammar`` / ``structured_outputs.grammar``, SGLang's ``ebnf``) and structural tags; and
a ``guided_decoding_backend`` other than ``"auto"``: vLLM's V1 engine refuses a request-level
backend that is not the one it was started with ("Request-level structured output backend
selection is no longer supported", vllm/v1/engine/processor.py), and ember has one engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, describe, require_object, wrong_type
from ember.models.api.tools import ResponseFormat
from ember.models.constrain.automata import Automata
from ember.models.constrain.schema_check import check_schema

SUPPORTED = (
    "regex (regex, guided_regex, structured_outputs.regex), a choice (guided_choice, "
    "structured_outputs.choice) or JSON (response_format, guided_json, structured_outputs.json)"
)
# field -> what it is, for the refusal
_GRAMMARS = {
    "guided_grammar": "EBNF grammar",
    "ebnf": "EBNF grammar",
    "structural_tag": "structural tag",
}
_STRUCTURED_GRAMMARS = {"grammar": "EBNF grammar", "structural_tag": "structural tag"}
_SPECIAL = set("\\.^$*+?()[]{}|")
# A choice list is compiled as the trie of its choices (constrain/regex_literals.py): its
# pattern's characters (at most 2 a choice's character, escaped, and 1 a choice), 1 an
# alternative (1 a choice) and a unit a trie node (at most 1 a character). Within these bounds
# that is at most 3 x 150,000 + 2 x 50,000 = 550,004 units: every list within them fits an
# empty request budget (600,000, automata.py), ~0.7 CPU-s of the compile worker at 5,000 x 30
# characters. 5,000 x 30 and 20,000 x 6 worked before the budget (review43 MEDIUM-2), and do.
MAX_CHOICES = 50_000
MAX_CHOICE_CHARACTERS = 150_000
CHOICE_BOUND = (
    f"a choice list of at most {MAX_CHOICES:,} choices and {MAX_CHOICE_CHARACTERS:,} characters "
    "in all"
)


def choice_regex(value: object, where: str) -> str:
    """``["yes", "no"]`` -> ``(?:yes|no)``: the output is one alternative, as written. A list
    past ``MAX_CHOICES`` or ``MAX_CHOICE_CHARACTERS`` is refused naming both bounds."""
    if not isinstance(value, list) or not value:
        raise wrong_type(where, "a non-empty array of strings", value)
    characters = 0
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise wrong_type(at(where, i), "a string", item)
        characters += len(item)
    if len(value) > MAX_CHOICES or characters > MAX_CHOICE_CHARACTERS:
        raise InvalidRequestField(
            where,
            CHOICE_BOUND,
            f"{len(value):,} choices of {characters:,} characters in all",
            "unsupported_value",
        )
    alternatives = ["".join("\\" + c if c in _SPECIAL else c for c in item) for item in value]
    return "(?:" + "|".join(alternatives) + ")"


def choice_field(data: Mapping, path: str = "") -> tuple[str, str] | None:
    """(where, regex) for the request's choice constraint, or None."""
    found = []
    if data.get("guided_choice") is not None:
        found.append(at(path, "guided_choice"))
        value = data["guided_choice"]
    structured = _structured(data, path)
    if structured is not None and structured.get("choice") is not None:
        found.append(at(at(path, "structured_outputs"), "choice"))
        value = structured["choice"]
    if not found:
        return None
    if len(found) > 1:
        raise InvalidRequestField(found[1], f"one choice (already given at '{found[0]}')", "both")
    return found[0], choice_regex(value, found[0])


def json_format(
    data: Mapping, path: str, response_format: ResponseFormat, budget: Automata | None = None
) -> ResponseFormat:
    """``response_format`` with vLLM's ``guided_json`` / ``structured_outputs.json`` (or
    ``.json_object``) folded in; two JSON constraints in one request are a 400."""
    given: list[tuple[str, ResponseFormat]] = []
    if response_format.type != "text":
        given.append((at(path, "response_format"), response_format))
    structured = _structured(data, path) or {}
    where = at(path, "structured_outputs")
    for value, name in (
        (data.get("guided_json"), at(path, "guided_json")),
        (structured.get("json"), at(where, "json")),
    ):
        if value is not None:
            given.append((name, _schema_format(value, name, budget)))
    if structured.get("json_object") not in (None, False):
        given.append((at(where, "json_object"), ResponseFormat("json_object")))
    if len(given) > 1:
        raise InvalidRequestField(
            given[1][0], f"one JSON constraint (already given at '{given[0][0]}')", "a second one"
        )
    return given[0][1] if given else response_format


def refuse_grammars(data: Mapping, path: str = "") -> None:
    """A grammar or structural tag is a 400 naming it (ember enforces no EBNF)."""
    for key, what in _GRAMMARS.items():
        if data.get(key) is not None:
            _refuse(at(path, key), what)
    structured = _structured(data, path) or {}
    for key, what in _STRUCTURED_GRAMMARS.items():
        if structured.get(key) is not None:
            _refuse(at(at(path, "structured_outputs"), key), what)


def refuse_backend(data: Mapping, path: str = "") -> None:
    """vLLM's ``guided_decoding_backend``: null or ``"auto"`` (the engine's own), else a 400."""
    value = data.get("guided_decoding_backend")
    if value is not None and value != "auto":
        raise InvalidRequestField(
            at(path, "guided_decoding_backend"),
            "null or 'auto' (request-level backend selection is not supported, as in vLLM's V1 "
            "engine: ember enforces every constraint with its own)",
            describe(value),
            "unsupported_value",
        )


def _refuse(where: str, what: str) -> None:
    raise InvalidRequestField(
        where,
        f"no {what} (not supported; ember enforces {SUPPORTED})",
        "a value",
        "unsupported_value",
    )


def _structured(data: Mapping, path: str) -> Mapping | None:
    value = data.get("structured_outputs")
    return None if value is None else require_object(value, at(path, "structured_outputs"))


def _schema_format(value: object, where: str, budget: Automata | None) -> ResponseFormat:
    """vLLM takes the schema as an object or as its JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise wrong_type(where, "a JSON schema (an object, or its JSON text)", value) from None
    if not isinstance(value, Mapping | bool):
        raise InvalidRequestField(where, "a JSON schema object", describe(value))
    check_schema(value, path=where, strict=True, budget=budget)  # refused here, naming the keyword
    return ResponseFormat("json_schema", value, "guided_json")
