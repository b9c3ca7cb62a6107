"""The regex constraint of a request, under the names SGLang and vLLM give it: SGLang's
``regex`` (top level of ``/v1/chat/completions`` and ``/v1/completions``, ``sampling_params``
of ``/generate``), vLLM's ``structured_outputs.regex`` and its older ``guided_regex``. The
pattern is compiled here, so a pattern ember cannot enforce is refused when the request
arrives, naming the construct and its offset."""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, require_object, wrong_type
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.string_schema import REGEX_SUBSET

# vLLM's structured_outputs constraints other than regex: refused rather than silently
# ignored (the output would come back unconstrained).
_OTHER_STRUCTURED = ("json", "choice", "grammar", "json_object", "structural_tag")


def checked_regex(value: object, where: str) -> str:
    """``value`` as a pattern ember compiles, or ``InvalidRequestField`` at ``where``."""
    if not isinstance(value, str):
        raise wrong_type(where, "a regular expression (a string)", value)
    try:
        compile_regex(value)
    except RegexError as error:
        raise InvalidRequestField(
            where, REGEX_SUBSET, f"{error} in {value[:80]!r}", "unsupported_value"
        ) from None
    return value


def regex_field(data: Mapping, path: str = "") -> str | None:
    """The request's regex (None when it has none) from ``regex``, ``guided_regex`` or
    ``structured_outputs.regex``; at most one of them may be set."""
    found: list[tuple[str, object]] = []
    for key in ("regex", "guided_regex"):
        if data.get(key) is not None:
            found.append((at(path, key), data[key]))
    structured = data.get("structured_outputs")
    if structured is not None:
        where = at(path, "structured_outputs")
        options = require_object(structured, where)
        for key in _OTHER_STRUCTURED:
            if options.get(key) not in (None, False):
                raise InvalidRequestField(
                    at(where, key),
                    "regex (other structured_outputs are not supported; use response_format "
                    "for JSON)",
                    "a value",
                    "unsupported_value",
                )
        if options.get("regex") is not None:
            found.append((at(where, "regex"), options["regex"]))
    if not found:
        return None
    if len(found) > 1:
        raise InvalidRequestField(
            found[1][0], f"one regex (already given at '{found[0][0]}')", "a second one"
        )
    where, value = found[0]
    return checked_regex(value, where)
