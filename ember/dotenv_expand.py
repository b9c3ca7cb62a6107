"""``$VAR`` / ``${VAR}`` expansion in a ``.env`` secrets file, as ``wrangler deploy --secrets-file``
does it (wrangler 4.164: ``parseAndExpandDotEnv`` in workers-utils, over dotenv-expand 13).

The rules, so the same file means the same secrets under wrangler and ember:

- ``$NAME`` and ``${NAME}`` are replaced by the process environment's ``NAME``, else by an
  earlier key of the file, else by nothing. ``${NAME:-default}`` / ``${NAME-default}`` give a
  default, ``${NAME:+alt}`` / ``${NAME+alt}`` give ``alt`` only when ``NAME`` is set. ``\\$``
  is a literal ``$``; a ``$`` not followed by a name stays.
- A key the process environment also sets takes the environment's value (empty included):
  CI can override one secret of a committed file. That is why wrangler calls these files
  "trusted": a line can read, and upload, any environment variable.

Only ``.env`` content is expanded; a JSON secrets file is taken literally. A replacement is
inserted as JavaScript's ``String.replace`` inserts it (``$$`` is one ``$``, ``$&`` the reference
itself), since that is what wrangler uploads. Where dotenv-expand would loop for ever (a value
that keeps producing new references) ember stops with an error naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ember.errors import ConfigError

_REFERENCE = re.compile(r"(?<!\\)\$\{([^{}]+)\}|(?<!\\)\$([A-Za-z_][A-Za-z0-9_]*)")
_OPERATOR = re.compile(r":\+|\+|:-|-")
MAX_REPLACEMENTS = 1000  # dotenv-expand stops on a repeated value; this bounds any other loop
MAX_EXPANDED_CHARS = 1 << 20  # and this one a value that doubles on every replacement
_JS_REPLACEMENT = re.compile(r"\$([$&`'])")


def expand_dotenv(
    parsed: Mapping[str, str], environ: Mapping[str, str], fname: str = ".env"
) -> dict[str, str]:
    """``parsed`` (a .env file's values, in file order) expanded against ``environ``;
    ``fname`` names the file in errors."""
    running: dict[str, str] = {}
    for key, raw in parsed.items():
        if environ.get(key) and environ[key] != raw:
            value = environ[key]
        else:
            value = _expand_value(raw, {**running, **environ}, running)
            if value is None:
                raise ConfigError(
                    fname,
                    key,
                    "<not shown>",
                    "$VAR references that end (this value keeps expanding)",
                )
        running[key] = value.replace("\\$", "$")
    # wrangler's own step after dotenv-expand: the environment wins for every key it has.
    return {key: environ.get(key, value) for key, value in running.items()}


def _expand_value(value: str, scope: Mapping[str, str], running: Mapping[str, str]) -> str | None:
    """The expanded value, or None if it does not settle."""
    seen: set[str] = set()
    for _ in range(MAX_REPLACEMENTS):
        match = _REFERENCE.search(value)
        if match is None:
            return value
        if len(value) > MAX_EXPANDED_CHARS:
            return None
        seen.add(value)
        expression = match.group(1) or match.group(2)
        operator = _OPERATOR.search(expression)
        name, rest = expression, ""
        if operator is not None:
            name, *tail = expression.split(operator.group(0))
            rest = operator.group(0).join(tail)
        if operator is not None and operator.group(0) in (":+", "+"):
            replacement = rest if scope.get(name) else ""
        elif scope.get(name):
            # A value already produced on the way means a cycle: use the default instead.
            replacement = rest if scope[name] in seen else scope[name]
        else:
            replacement = rest
        value = _replace_first(value, match.group(0), replacement)
        if value == running.get(name):
            return value
    return None


def _replace_first(text: str, template: str, replacement: str) -> str:
    """JavaScript's ``text.replace(template, replacement)`` for a string pattern: the first
    occurrence (which may sit before the reference matched), with ``$$ $& $` $'`` expanded."""
    start = text.find(template)
    end = start + len(template)
    special = {"$": "$", "&": template, "`": text[:start], "'": text[end:]}
    inserted = _JS_REPLACEMENT.sub(lambda m: special[m.group(1)], replacement)
    return text[:start] + inserted + text[end:]
