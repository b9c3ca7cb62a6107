"""The regex constraint of a request, under the names SGLang and vLLM give it: SGLang's
``regex`` (top level of ``/v1/chat/completions`` and ``/v1/completions``, ``sampling_params``
of ``/generate``), vLLM's ``structured_outputs.regex`` and its older ``guided_regex``, and a
choice (``guided_fields``) as the regex of its alternatives. The pattern is compiled here,
through the request's ``Automata`` (its budget, shared with its schemas; the process's automaton
cache; the compile worker), so a pattern ember cannot enforce is refused when the request
arrives, naming the construct and its offset, and the grammar build finds the automaton built
(review43 MEDIUM-1: it was built here apart, thrown away, and built again unbudgeted)."""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, require_object, wrong_type
from ember.models.api.guided_fields import (
    CHOICE_BOUND,
    choice_field,
    refuse_backend,
    refuse_grammars,
)
from ember.models.constrain.automata import Automata
from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.string_schema import REGEX_SUBSET

_WORK = "units of automaton work (pattern characters, class ranges, states built and visited)"


def checked_regex(
    value: object, where: str, automata: Automata | None = None, *, choice: bool = False
) -> str:
    """``value`` as a pattern ember compiles, built (or found) within ``automata``'s budget
    (a budget of its own when None), or ``InvalidRequestField`` at ``where``. ``choice``: the
    pattern is a choice list's, and a refusal says so (the client sent a list, not a regex)."""
    if not isinstance(value, str):
        raise wrong_type(where, "a regular expression (a string)", value)
    budget = Automata() if automata is None else automata
    left = budget.limit - budget.states
    try:
        budget.regex(value, where)
    except AutomatonBudgetExceeded as error:
        if type(error) is not AutomatonBudgetExceeded:
            raise  # the compile worker's time or size bound: its own message names it
        raise _over_budget(budget, where, left, choice) from None
    except RegexError as error:
        raise InvalidRequestField(
            where, REGEX_SUBSET, f"{error} in {value[:80]!r}", "unsupported_value"
        ) from None
    return value


def _over_budget(budget: Automata, where: str, left: int, choice: bool) -> InvalidRequestField:
    taken = budget.limit - left
    shared = f"; the request's schemas took {taken:,}" if taken else ""
    if choice:
        expected = f"{CHOICE_BOUND}, within the request's {budget.limit:,} {_WORK}, {budget.scope}"
        got = f"a list that needs more than the {left:,} units left{shared}"
    else:
        expected = (
            f"a regular expression of at most {budget.limit:,} {_WORK}, with the request's "
            f"schemas, {budget.scope}"
        )
        got = f"one that needs more than the {left:,} left{shared}"
    return AutomatonBudgetExceeded(where, expected, got)


def regex_field(data: Mapping, path: str = "", automata: Automata | None = None) -> str | None:
    """The request's regex (None when it has none) from ``regex``, ``guided_regex`` or
    ``structured_outputs.regex``, or a choice (``guided_choice``, ``structured_outputs.choice``)
    as the regex of its alternatives; at most one of them may be set. Grammars are refused
    here too, as is a request-level backend, and JSON is ``guided_fields.json_format``'s.
    ``automata``: the request's budget (checked_regex)."""
    refuse_grammars(data, path)
    refuse_backend(data, path)
    found: list[tuple[str, object, bool]] = []
    for key in ("regex", "guided_regex"):
        if data.get(key) is not None:
            found.append((at(path, key), data[key], False))
    structured = data.get("structured_outputs")
    if structured is not None:
        where = at(path, "structured_outputs")
        options = require_object(structured, where)
        if options.get("regex") is not None:
            found.append((at(where, "regex"), options["regex"], False))
    choice = choice_field(data, path)
    if choice is not None:
        found.append((*choice, True))
    if not found:
        return None
    if len(found) > 1:
        raise InvalidRequestField(
            found[1][0], f"one regex (already given at '{found[0][0]}')", "a second one"
        )
    where, value, is_choice = found[0]
    return checked_regex(value, where, automata, choice=is_choice)
