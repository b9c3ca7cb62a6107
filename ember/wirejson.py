"""JSON from the network, read strictly: what Python's ``json`` accepts but must not get further.

``json.loads`` takes three things that later break a server that stores and re-sends the value:

- ``NaN``, ``Infinity`` and ``-Infinity`` (and numbers such as ``1e999``, which read as infinity):
  not JSON; a value holding one cannot be answered again
  (Starlette's ``JSONResponse`` refuses them), so a stored one breaks every later read of it.
- a lone surrogate escape such as ``"\\ud800"``: a Python string that cannot be encoded as UTF-8,
  so SQLite, ``str.encode`` and every JSON response fail on it, again on every later read.
- nesting deeper than the interpreter's recursion limit (``[[[[...``): ``RecursionError``.

``loads_strict`` refuses all three with a ``WireJSONError`` that says which, so callers turn it
into their own 400 rather than storing a value that fails later, for its owner and for nobody else.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# A \uD800-\uDFFF escape: the only way a surrogate gets into a string json.loads returns (the
# UTF-8 decoder refuses encoded surrogates). Without one, the slower check below is skipped.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class WireJSONError(ValueError):
    """The text is not JSON that can be stored and answered again; the message says why."""


def _no_constants(name: str) -> Any:
    raise WireJSONError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    # 1e999 is JSON, but Python reads it as inf, which no JSON answer can carry again.
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise WireJSONError(f"the number {shown} is too large for a 64-bit float")
    return value


def loads_strict(data: bytes | str) -> Any:
    """Parse ``data`` (UTF-8 bytes or text) or raise ``WireJSONError``."""
    if isinstance(data, str):
        text = data
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise WireJSONError("the text has a lone surrogate (not valid Unicode)") from None
    else:
        try:
            text = data.decode("utf-8-sig")  # a leading BOM is tolerated, as json.loads does
        except UnicodeDecodeError as exc:
            raise WireJSONError(f"the bytes are not UTF-8: {exc}") from None
    try:
        value = json.loads(text, parse_constant=_no_constants, parse_float=_finite)
    except WireJSONError:
        raise
    except ValueError as exc:  # JSONDecodeError, and an integer past Python's digit limit
        raise WireJSONError(str(exc)) from None
    except RecursionError:
        raise WireJSONError("the JSON is nested too deeply to read") from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise WireJSONError(
                "a string has a lone surrogate escape such as \\ud800 (not valid Unicode)"
            ) from None
        except RecursionError:
            raise WireJSONError("the JSON is nested too deeply to read") from None
    return value


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (UTF-8), as it is stored or sent on."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))
