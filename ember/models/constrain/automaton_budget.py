"""The request's automaton budget's refusal, apart from automata.py so that the compile client
(which automata.py imports, through the cache) can raise its own kinds of it."""

from __future__ import annotations

from ember.models.api.errors import InvalidRequestField


class AutomatonBudgetExceeded(InvalidRequestField):
    """A schema's automata passed the request's budget (automata.py ``MAX_AUTOMATON_WORK``): a
    400 even where a keyword ember cannot use would be ignored (lenient), since ignoring it
    would not make the schema cheap. Every ``except InvalidRequestField`` that drops a keyword
    or an alternative re-raises it first."""
