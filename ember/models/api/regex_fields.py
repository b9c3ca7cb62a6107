"""The regex constraint of a request, under the names SGLang and vLLM give it: SGLang's
``regex`` (top level of ``/v1/chat/completions`` and ``/v1/completions``, ``sampling_params``
of ``/generate``), vLLM's ``structured_outputs.regex`` and its older ``guided_regex``, and a
choice (``guided_fields``) as the regex of its alternatives. The
pattern is compiled here, so a pattern ember cannot enforce is refused when the request
arrives, naming the construct and its offset."""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, require_object, wrong_type
from ember.models.api.guided_fields import choice_field, refuse_backend, refuse_grammars
from ember.models.constrain.automata import MAX_AUTOMATON_WORK
from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.regex_work import AutomatonWorkExceeded
from ember.models.constrain.string_schema import REGEX_SUBSET


def checked_regex(value: object, where: str) -> str:
    """``value`` as a pattern ember compiles, or ``InvalidRequestField`` at ``where``."""
    if not isinstance(value, str):
        raise wrong_type(where, "a regular expression (a string)", value)
    try:
        # Within a request's automaton budget, as a schema's patterns are: unbounded, 39
        # characters of optional items in a row were ~4,000,000 units, seconds of CPU.
        compile_regex(value, budget=MAX_AUTOMATON_WORK)
    except AutomatonWorkExceeded as error:
        raise AutomatonBudgetExceeded(
            where,
            f"a regular expression of at most {MAX_AUTOMATON_WORK:,} units of automaton work "
            "(pattern characters, class ranges, states built and visited)",
            f"one that needs more ({error.work:,} when it was stopped)",
        ) from None
    except RegexError as error:
        raise InvalidRequestField(
            where, REGEX_SUBSET, f"{error} in {value[:80]!r}", "unsupported_value"
        ) from None
    return value


def regex_field(data: Mapping, path: str = "") -> str | None:
    """The request's regex (None when it has none) from ``regex``, ``guided_regex`` or
    ``structured_outputs.regex``, or a choice (``guided_choice``, ``structured_outputs.choice``)
    as the regex of its alternatives; at most one of them may be set. Grammars are refused
    here too, as is a request-level backend, and JSON is ``guided_fields.json_format``'s."""
    refuse_grammars(data, path)
    refuse_backend(data, path)
    found: list[tuple[str, object]] = []
    for key in ("regex", "guided_regex"):
        if data.get(key) is not None:
            found.append((at(path, key), data[key]))
    structured = data.get("structured_outputs")
    if structured is not None:
        where = at(path, "structured_outputs")
        options = require_object(structured, where)
        if options.get("regex") is not None:
            found.append((at(where, "regex"), options["regex"]))
    choice = choice_field(data, path)
    if choice is not None:
        found.append(choice)
    if not found:
        return None
    if len(found) > 1:
        raise InvalidRequestField(
            found[1][0], f"one regex (already given at '{found[0][0]}')", "a second one"
        )
    where, value = found[0]
    return checked_regex(value, where)
