"""The input of ``ember secret bulk [FILE]``, read as wrangler reads it (``parseBulkInputToObject``
in workers-sdk's deploy-helpers).

A JSON object ``{"NAME": "value" | null, ...}`` (null deletes the secret), else ``.env`` lines
``NAME=value`` (``ember.dotenv``, dotenv's rules; no deletes). From FILE, or from stdin when no
file is given. ``deploy --secrets-file`` also expands ``$VAR`` in ``.env`` content against the
process environment (``ember.dotenv_expand``); ``secret bulk`` does not, as in wrangler.
Errors use wrangler's sentences, naming the file (or "piped input") and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.dotenv import parse_dotenv_text
from ember.dotenv_expand import expand_dotenv
from ember.errors import ConfigError, UserError

STDIN_NAME = "piped input"


class NoSecretsInput(UserError):
    """Nothing to read: an empty file or nothing piped in."""

    def __init__(self) -> None:
        super().__init__("🚨 No content found in file, or piped input.")


@dataclass(frozen=True, slots=True)
class SecretsInput:
    """What to change: each name with its new value, or None to delete it (in file order)."""

    changes: dict[str, str | None]
    format: str  # "json" or "dotenv"


def parse_secrets(text: str, source: str, environ: Mapping[str, str] | None = None) -> SecretsInput:
    """``text`` as a JSON object of secrets, else as ``.env`` lines; ``source`` names it.
    With ``environ``, ``.env`` values are expanded against it (wrangler's --secrets-file)."""
    if not text.strip():
        raise NoSecretsInput()
    try:
        content: Any = json.loads(text)
    except ValueError as json_error:
        try:
            values = parse_dotenv_text(text, source)
        except ConfigError as dotenv_error:
            raise UserError(
                f'The contents of "{source}" is not valid. It is neither JSON ({json_error}) '
                f"nor .env lines ({dotenv_error})."
            ) from None
        if not values:
            raise UserError(f'The contents of "{source}" is not valid.') from None
        if environ is not None:
            values = expand_dotenv(values, environ, source)
        return SecretsInput(changes=dict(values), format="dotenv")
    if not isinstance(content, dict):
        raise UserError(
            f'The contents of "{source}" is not valid. It should be a JSON object of string values.'
        )
    for key, value in content.items():
        if value is not None and not isinstance(value, str):
            raise UserError(
                f'The value for "{key}" in "{source}" is not null or a "string" instead it is '
                f'of type "{_js_type(value)}"'
            )
    return SecretsInput(changes=content, format="json")


def read_secrets(
    path: Path | None, stdin_text: str | None, environ: Mapping[str, str] | None = None
) -> SecretsInput:
    """The secrets of ``path``, or of ``stdin_text`` (what was piped in) when there is no file;
    ``environ`` as in ``parse_secrets``."""
    if path is None:
        return parse_secrets(stdin_text or "", STDIN_NAME, environ)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f'could not read "{path}": {exc}') from None
    return parse_secrets(text, str(path), environ)


def _js_type(value: object) -> str:
    """JavaScript's ``typeof`` (wrangler's message names the type so)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "object"
