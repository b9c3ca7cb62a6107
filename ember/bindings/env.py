"""``env``: what a handler sees as ``self.env`` / ``env`` (isolate side).

Vars are strings or JSON values (objects become ``JsDict``), secrets are ``Secret`` strings whose
``repr`` never shows the value, and bindings are their clients. ``repr(env)`` lists names only
for secrets, so a stray ``print(env)`` cannot leak one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.bindings.jsdict import to_jsdict


class Secret(str):
    """A secret's value: a normal ``str`` to the handler, masked in ``repr``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('********')"


@dataclass(frozen=True, slots=True)
class MissingNameHints:
    """What ``env.NAME``'s error can add about a name env lacks: ``deployed``, the worker runs
    on a platform (where ``.dev.vars`` never reaches); ``examples``, names a secrets example
    file of the project lists (``API_KEY`` -> ``.dev.vars.example``) that no secrets file sets."""

    deployed: bool = False
    examples: Mapping[str, str] = field(default_factory=dict)

    def to_wire(self) -> dict[str, object]:
        return {"deployed": self.deployed, "examples": dict(self.examples)}

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any] | None) -> MissingNameHints:
        wire = wire or {}
        return cls(bool(wire.get("deployed")), dict(wire.get("examples") or {}))


class Env:
    """The handler's environment: attribute and item access to vars, secrets and bindings."""

    __slots__ = ("_values", "_secret_names", "_hints")

    def __init__(
        self,
        vars: Mapping[str, object],
        secrets: Mapping[str, str],
        bindings: Mapping[str, object],
        hints: MissingNameHints | None = None,
    ) -> None:
        values: dict[str, Any] = {name: to_jsdict(value) for name, value in vars.items()}
        values.update({name: Secret(value) for name, value in secrets.items()})
        values.update(bindings)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_secret_names", frozenset(secrets))
        object.__setattr__(self, "_hints", hints or MissingNameHints())

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(_missing(name, self._values, self._hints)) from None

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


def _missing(name: str, values: Mapping[str, object], hints: MissingNameHints) -> str:
    """Why ``env.NAME`` failed: the nearest name (as the AI inputs' notes suggest one, by
    difflib) and every name env has; for a name that may be a secret, where secrets come from
    here (``_secret_hint``). Names only: a secret's value never goes in an error."""
    message = f"env has no binding or variable named {name!r}"
    if name.startswith("__"):
        return message  # a library probing for a protocol (copy's __deepcopy__), not a person
    secret = _secret_hint(name, hints)
    if not values:
        if secret:
            return message + secret
        return f"{message}; env has no bindings, vars or secrets (add them to the config)"
    names = sorted(values)
    by_lower = {n.lower(): n for n in names}
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    if near:
        message += f"; did you mean {by_lower[near[0]]!r}?"
    elif secret:
        message += secret
    elif name == "AI":
        # The name every Workers AI example uses: the one binding a first AI call is missing.
        message += (
            "; to call models, declare the AI binding in the project's config "
            '(ai: {binding: AI} in ember.yaml; [ai] binding = "AI" in wrangler.toml)'
        )
    return f"{message} (env has: {', '.join(names)})"


def _secret_hint(name: str, hints: MissingNameHints) -> str:
    """A secret the user has locally but this env lacks: listed in an example file (dev), or
    any name at all on a platform, where ``.dev.vars`` never goes (``ember secret put`` does)."""
    put = f"ember secret put {name}"
    example = hints.examples.get(name)
    if example is not None:
        return (
            f"; {example} lists {name} but no secrets file sets it: copy the line into "
            f".dev.vars with its value (read by ember dev only; a deployed worker needs `{put}`)"
        )
    if hints.deployed and name != "AI":
        return (
            "; if it is a secret from .dev.vars or .env, those are read by ember dev only: "
            f"give the deployed worker its own with `{put}` (a var goes in the config's vars)"
        )
    return ""
