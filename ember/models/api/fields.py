"""Reading request fields with JSON-pointer paths, so every error names the field
(``/messages/2/content``) and says what was expected. ``null`` means "use the default"
for optional fields, as in OpenAI's and Workers AI's schemas."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ember.models.api.errors import InvalidRequestField


def describe(value: object) -> str:
    """How a value is named in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def shown_number(value: object) -> str:
    """How a value of the right type but out of range is named: the number itself (``got 0``
    after ``expected an integer >= 1``), since saying "a number" there reads as a wrong type."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return describe(value)


def at(path: str, key: str | int) -> str:
    part = str(key).replace("~", "~0").replace("/", "~1")
    return f"{path}/{part}"


def wrong_type(path: str, expected: str, value: object) -> InvalidRequestField:
    return InvalidRequestField(path, expected, describe(value), code="invalid_type")


def require_object(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise wrong_type(path or "/", "an object", value)
    return value


def require_present(body: Mapping[str, Any], key: str, path: str) -> Any:
    if body.get(key) is None:
        raise InvalidRequestField(
            at(path, key),
            f"a value for required field '{key}'",
            "nothing",
            code="missing_required_parameter",
        )
    return body[key]


def optional_bool(body: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise wrong_type(at(path, key), "true or false", value)
    return value


def optional_str(body: Mapping[str, Any], key: str, path: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise wrong_type(at(path, key), "a string", value)
    return value


def optional_choice(
    body: Mapping[str, Any], key: str, path: str, choices: Sequence[str], default: str | None
) -> str | None:
    value = body.get(key)
    if value is None:
        return default
    if value not in choices:
        expected = "one of " + ", ".join(repr(c) for c in choices)
        raise InvalidRequestField(at(path, key), expected, describe(value))
    return value


def optional_number(
    body: Mapping[str, Any],
    key: str,
    path: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    default: float | None = None,
    exclusive_minimum: bool = False,
) -> float | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise wrong_type(at(path, key), "a number", value)
    low_ok = minimum is None or (value > minimum if exclusive_minimum else value >= minimum)
    if not low_ok or (maximum is not None and value > maximum):
        low = "" if minimum is None else (f"> {minimum}" if exclusive_minimum else f">= {minimum}")
        high = "" if maximum is None else f"<= {maximum}"
        raise InvalidRequestField(
            at(path, key),
            "a number " + " and ".join(filter(None, (low, high))),
            shown_number(value),
        )
    return float(value)


def optional_int(
    body: Mapping[str, Any],
    key: str,
    path: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(at(path, key), "an integer", value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "" if minimum is None else f">= {minimum}"
        high = "" if maximum is None else f"<= {maximum}"
        expected = "an integer " + " and ".join(filter(None, (low, high)))
        raise InvalidRequestField(at(path, key), expected, shown_number(value))
    return value


def token_id_list(
    body: Mapping[str, Any], key: str, path: str, *, skip_nulls: bool = False
) -> tuple[int, ...]:
    """An optional array of token ids (``stop_token_ids``); null or absent is empty.
    ``skip_nulls``: null entries are dropped (SGLang's /generate filters them out)."""
    value = body.get(key)
    if value is None:
        return ()
    where = at(path, key)
    if not isinstance(value, list):
        raise wrong_type(where, "an array of token ids", value)
    out = []
    for i, item in enumerate(value):
        if item is None and skip_nulls:
            continue
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise wrong_type(at(where, i), "a token id (a non-negative integer)", item)
        out.append(item)
    return tuple(out)


def stop_sequences(
    body: Mapping[str, Any], key: str, path: str, most: int = 4, *, allow_empty: bool = False
) -> tuple[str, ...]:
    """``stop``: a string or an array of at most ``most`` non-empty strings. An empty array is
    no stop strings, as null is: SGLang's own frontend (``SglSamplingParams.to_srt_kwargs``)
    sends ``"stop": []`` on every call, and vLLM's request models default ``stop`` to [].
    ``allow_empty``: SGLang's /generate serves an empty stop string (it matches at once: see
    ``sampling.stop``); vLLM refuses one, and so do the OpenAI routes."""
    value = body.get(key)
    if value is None:
        return ()
    where = at(path, key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > most:
        raise wrong_type(where, f"a string or an array of at most {most} strings", value)
    for i, item in enumerate(value):
        if not isinstance(item, str) or not (item or allow_empty):
            raise wrong_type(at(where, i), "a non-empty string", item)
    return tuple(value)


# How deep a request body may nest (JSON pointer steps). What reads a body after the parser
# (chat templates, schema compilers, the gateway's re-encoding) recurses per level and runs out
# of stack far sooner than the parser does; a schema has its own, smaller limit (constrain).
MAX_BODY_DEPTH = 192


def check_body(body: object, path: str = "") -> None:
    """Refuse what parses as JSON but no one after the parser can take: a lone surrogate
    (``"\\ud800"``: valid JSON, but no UTF-8 text holds it, so the tokenizer and every encoder
    fail), a number that is not finite, and nesting past ``MAX_BODY_DEPTH``. An
    ``InvalidRequestField`` names the first string or key with a surrogate, or number, or the
    top-level field that nests too deeply. Walked without recursion, in body order."""
    stack: list[tuple[str, object, int]] = [(path, body, 0)]
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, str):
            _require_encodable(value, where)
        elif isinstance(value, float) and not math.isfinite(value):
            # NaN, Infinity, or a number like 1e999 that Python reads as inf: no JSON answer
            # can carry it back (a schema's "maximum" is echoed, a stream dies midway).
            raise InvalidRequestField(
                where or "/", "a finite number (within a 64-bit float)", describe(value)
            )
        elif isinstance(value, dict | list):
            if depth >= MAX_BODY_DEPTH:
                top = "/".join(where.split("/")[:2])  # the field as the client sent it
                expected = f"a value nested at most {MAX_BODY_DEPTH} levels deep"
                raise InvalidRequestField(top or "/", expected, "a deeper one")
            if isinstance(value, dict):
                for key in value:
                    _require_encodable(key, at(where, key))
                items = [(at(where, k), v, depth + 1) for k, v in value.items()]
            else:
                items = [(at(where, i), v, depth + 1) for i, v in enumerate(value)]
            stack.extend(reversed(items))


def _require_encodable(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        lone = f"\\u{ord(text[exc.start]):04x}"
        raise InvalidRequestField(
            path or "/",
            "text without lone surrogates (valid Unicode)",
            f"the lone surrogate {lone}",
        ) from None


def loads_checked(text: str, path: str) -> object:
    """JSON sent as a string inside the body (a /generate ``json_schema``, tool call
    ``arguments``), held to ``check_body``'s rules as the body is. Raises ``ValueError`` for
    text that is not JSON (the caller says what it expected), ``InvalidRequestField`` for the
    rest."""
    try:
        value = json.loads(text)
    except RecursionError:  # the parser recurses per level
        raise InvalidRequestField(
            path, f"JSON nested at most {MAX_BODY_DEPTH} levels deep", "a deeper one"
        ) from None
    check_body(value, path)
    return value


# Token ids are below 2**31 (every vocabulary ember serves is far smaller): ten digits.
MAX_TOKEN_ID_DIGITS = 10


def logit_bias(body: Mapping, path: str) -> dict[int, float]:
    """OpenAI's ``logit_bias``: token id (a string of digits) -> bias in [-100, 100]."""
    value = body.get("logit_bias")
    if value is None:
        return {}
    where = at(path, "logit_bias")
    bias = require_object(value, where)
    out: dict[int, float] = {}
    keys: dict[int, str] = {}
    for key, number in bias.items():
        # ASCII digits only: str.isdigit() takes "²" too, which int() then refuses (review31);
        # and at most MAX_TOKEN_ID_DIGITS of them: int() refuses over 4,300 (review34).
        if not (
            isinstance(key, str)
            and key.isascii()
            and key.isdigit()
            and len(key) <= MAX_TOKEN_ID_DIGITS
        ):
            expected = f"a token id (up to {MAX_TOKEN_ID_DIGITS} ASCII digits) as the key"
            raise InvalidRequestField(at(where, key), expected, describe(key))
        token = int(key)
        if token in keys:  # "1" and "01" name one token: which bias was meant?
            raise InvalidRequestField(
                at(where, key),
                "one key per token id",
                f"{key!r}, which names token {token} as {keys[token]!r} does",
            )
        keys[token] = key
        if number is None:  # optional_number would take null as absent
            raise wrong_type(at(where, key), "a number from -100 to 100", number)
        out[token] = optional_number(bias, key, where, minimum=-100, maximum=100)  # type: ignore[assignment]
    return out
