"""``env``: what a handler sees as ``self.env`` / ``env`` (isolate side).

Vars are strings or JSON values (objects become ``JsDict``), secrets are ``Secret`` strings whose
``repr`` never shows the value, and bindings are their clients. ``repr(env)`` lists names only
for secrets, so a stray ``print(env)`` cannot leak one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any

from ember.bindings.jsdict import to_jsdict


class Secret(str):
    """A secret's value: a normal ``str`` to the handler, masked in ``repr``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('********')"


class Env:
    """The handler's environment: attribute and item access to vars, secrets and bindings."""

    __slots__ = ("_values", "_secret_names")

    def __init__(
        self,
        vars: Mapping[str, object],
        secrets: Mapping[str, str],
        bindings: Mapping[str, object],
    ) -> None:
        values: dict[str, Any] = {name: to_jsdict(value) for name, value in vars.items()}
        values.update({name: Secret(value) for name, value in secrets.items()})
        values.update(bindings)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_secret_names", frozenset(secrets))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(_missing(name, self._values)) from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("env is read-only")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, name: str, default: Any = None) -> Any:
        """Like ``dict.get``."""
        return self._values.get(name, default)

    def keys(self) -> list[str]:
        """Names of every var, secret and binding."""
        return list(self._values)

    def __dir__(self) -> list[str]:
        return sorted(self._values)

    def __repr__(self) -> str:
        parts = []
        for name, value in self._values.items():
            if name in self._secret_names:
                parts.append(f"{name}=<secret>")
            elif isinstance(value, str | int | float | bool) or value is None:
                parts.append(f"{name}={value!r}")
            else:
                parts.append(f"{name}=<{type(value).__name__}>")
        return f"Env({', '.join(parts)})"


def _missing(name: str, values: Mapping[str, object]) -> str:
    """Why ``env.NAME`` failed: the nearest name (as the AI inputs' notes suggest one, by
    difflib) and every name env has. Names only: a secret's value never goes in an error."""
    message = f"env has no binding or variable named {name!r}"
    if name.startswith("__"):
        return message  # a library probing for a protocol (copy's __deepcopy__), not a person
    if not values:
        return f"{message}; env has no bindings, vars or secrets (add them to the config)"
    names = sorted(values)
    by_lower = {n.lower(): n for n in names}
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    if near:
        message += f"; did you mean {by_lower[near[0]]!r}?"
    elif name == "AI":
        # The name every Workers AI example uses: the one binding a first AI call is missing.
        message += (
            "; to call models, declare the AI binding in the project's config "
            '(ai: {binding: AI} in ember.yaml; [ai] binding = "AI" in wrangler.toml)'
        )
    return f"{message} (env has: {', '.join(names)})"
