"""``_redirects`` and ``_headers``: the two files read as workers-shared's parsers read them.

``_redirects``: one ``source destination [status]`` rule a line (``#`` comments, also after the
destination), status 301, 302 (the default), 303, 307, 308 or 200 (serve another asset at this
URL); a source is a path, a destination a path or an ``https://`` URL. At most 2,000 static
rules (no ``*`` nor ``:placeholder``) and 100 dynamic ones, 1,000 characters a line.
``_headers``: a URL pattern line, then indented ``Name: value`` lines (a name repeated in a
rule joined with ``, ``, ``Set-Cookie`` too, as the platform joins it) and ``! Name`` lines
that remove a header; at most 100 rules, 2,000 characters a line. A line that breaks a rule is
skipped with a message naming it (wrangler prints them as warnings), never an error: the other
rules still apply. A rule's second ``Set-Cookie`` is kept, folded, with a warning of ember's own
(``Parsed.notes``): a browser reads the one header it makes as one cookie.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote

from ember.bindings.assets.rule_match import PLACEHOLDER

REDIRECTS_FILE = "_redirects"
HEADERS_FILE = "_headers"
MAX_REDIRECT_LINE_LENGTH = 1000
MAX_REDIRECT_STATIC_RULES = 2000
MAX_REDIRECT_DYNAMIC_RULES = 100
MAX_HEADER_RULES = 100
MAX_HEADER_LINE_LENGTH = 2000
# ember's (the platform publishes none): a request's headers are built from at most 3,200
# lines.
MAX_HEADERS_PER_RULE = 32
# ember's, per pattern: matching one costs about its segments and captures in Python, and 100
# rules of 397 segments cost over 100 ms a request (review17).
MAX_PATTERN_PLACEHOLDERS = 32
MAX_PATTERN_SEGMENTS = 64
_COMPLEX = (
    f"more than {MAX_PATTERN_PLACEHOLDERS} placeholders or {MAX_PATTERN_SEGMENTS} segments "
    "in one pattern (ember's limit): skipped"
)
REDIRECT_STATUSES = (200, 301, 302, 303, 307, 308)
# Skipped lines kept as examples (the rest counted): a file of 2M junk lines kept 2M messages,
# 876 MB (review17).
MAX_EXAMPLES = 20
_URL = re.compile(r"^https://+(?P<host>[^/]+)/?(?P<path>.*)", re.DOTALL)
_PORT = re.compile(r".*:\d+$")
_PROBABLY_A_PATH = re.compile(r"^([^\s]+://|/)")
# What the URL parser leaves as it is in a path; anything else is percent-encoded.
_PATH_SAFE = "/!$&'()*+,;=:@-._~%[]|^"
T = TypeVar("T")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")
_VALUE = re.compile(r"^[\t\x20-\x7e\xa0-\xff]*$")
# Names that frame the response or belong to one connection: the server sets them, and a rule
# setting (or removing) one would send a body its framing contradicts.
FRAMING = frozenset(
    {
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)
_FRAMING_MESSAGE = "sets how the response is framed (the server's to set): skipped"


@dataclass(frozen=True, slots=True)
class Invalid:
    """A line skipped (or, in ``Parsed.notes``, kept but warned about), and why
    (``line_number`` 0: the message is about the file)."""

    message: str
    line_number: int = 0
    line: str = ""


@dataclass(frozen=True, slots=True)
class RedirectRule:
    source: str
    destination: str
    status: int
    line_number: int

    @property
    def dynamic(self) -> bool:
        return "*" in self.source or PLACEHOLDER.search(self.source) is not None


@dataclass(frozen=True, slots=True)
class HeaderRule:
    path: str
    # Lower-case names, in the file's order: one value a name, a repeated one's joined.
    set: tuple[tuple[str, str], ...]
    unset: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    rules: tuple[T, ...]
    invalid: tuple[Invalid, ...]  # the first ``MAX_EXAMPLES`` lines skipped
    skipped: int = 0  # all of them
    # Lines kept that do something the author likely did not mean (the first
    # ``MAX_EXAMPLES``), and how many there were.
    notes: tuple[Invalid, ...] = ()
    noted: int = 0


class _Skips:
    """The lines skipped: counted, the first few kept."""

    def __init__(self) -> None:
        self.kept: list[Invalid] = []
        self.count = 0

    def append(self, item: Invalid) -> None:
        self.count += 1
        if len(self.kept) < MAX_EXAMPLES:
            self.kept.append(item)


def parse_redirects(text: str, html_handling: str = "auto-trailing-slash") -> Parsed[RedirectRule]:
    lines = text.split("\n")
    rules: list[RedirectRule] = []
    invalid = _Skips()
    seen: set[str] = set()
    static = dynamic = 0
    static_allowed = True
    for index, raw in enumerate(lines):
        number, line = index + 1, raw.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) > MAX_REDIRECT_LINE_LENGTH:
            invalid.append(
                Invalid(f"longer than {MAX_REDIRECT_LINE_LENGTH} characters: skipped", number)
            )
            continue
        tokens = line.split()
        comment = next((i for i, t in enumerate(tokens) if i >= 2 and t.startswith("#")), None)
        tokens = tokens[:comment]
        if not 2 <= len(tokens) <= 3:
            message = f"expected 2 or 3 whitespace-separated tokens, found {len(tokens)}"
            invalid.append(Invalid(message, number, line))
            continue
        source, error = _url(tokens[0], only_relative=True, no_ports=True, keep_query=False)
        if source is None:
            invalid.append(Invalid(error, number, line))
            continue
        if _too_complex(source):
            invalid.append(Invalid(_COMPLEX, number, line))
            continue
        if static_allowed and "*" not in source and not PLACEHOLDER.search(source):
            static += 1
            if static > MAX_REDIRECT_STATIC_RULES:
                message = f"more than {MAX_REDIRECT_STATIC_RULES} static rules: skipped"
                invalid.append(Invalid(message, number, line))
                continue
        else:
            dynamic += 1
            static_allowed = False
            if dynamic > MAX_REDIRECT_DYNAMIC_RULES:
                message = (
                    f"more than {MAX_REDIRECT_DYNAMIC_RULES} dynamic rules (with * or "
                    f":placeholder): this line and the {len(lines) - index - 1} after it skipped"
                )
                invalid.append(Invalid(message, number, line))
                break
        destination, error = _url(tokens[1], only_relative=False, no_ports=False, keep_query=True)
        if destination is None:
            invalid.append(Invalid(error, number, line))
            continue
        status_text = tokens[2] if len(tokens) == 3 else "302"
        status = int(status_text) if status_text.isdigit() else 0
        if status not in REDIRECT_STATUSES:
            message = f"status {status_text!r}: expected 200, 301, 302 (default), 303, 307 or 308"
            invalid.append(Invalid(message, number, line))
            continue
        relative = _URL.match(destination) is None
        to_index = re.search(r"/index(\.html)?$", destination) is not None
        loops = source.endswith("/*") or (source.endswith("/") and html_handling != "none")
        if relative and to_index and loops:
            message = (
                "an infinite loop: the redirect strips .html or /index from the destination "
                "and the result matches this rule again (skipped)"
            )
            invalid.append(Invalid(message, number, line))
            continue
        if source in seen:
            invalid.append(Invalid(f"a second rule for {source}: skipped", number, line))
            continue
        seen.add(source)
        if status == 200 and not relative:
            message = (
                f"a 200 (rewrite) rule must point to a path of these assets, not {destination}"
            )
            invalid.append(Invalid(message, number, line))
            continue
        rules.append(RedirectRule(source, destination, status, number))
    return Parsed(tuple(rules), tuple(invalid.kept), invalid.count)


def parse_headers(text: str) -> Parsed[HeaderRule]:
    lines = text.split("\n")
    rules: list[HeaderRule] = []
    invalid = _Skips()
    folded = _Skips()  # rules with a second Set-Cookie: one note each, at that line
    noted_rule = 0  # the line of the last rule noted
    # path, its line, its number, the headers set, those removed, a tally of lines taken.
    current: tuple[str, str, int, dict[str, str], list[str], list[int]] | None = None

    def close(number: int) -> None:
        if current is None:
            return
        path, line, at, values, unset, _ = current
        if values or unset:
            rules.append(HeaderRule(path, tuple(values.items()), tuple(unset)))
        else:
            invalid.append(Invalid("no headers under this path: skipped", at, line))

    for index, raw in enumerate(lines):
        number, line = index + 1, raw.strip()
        if not line or line.startswith("#"):
            continue
        if len(line) > MAX_HEADER_LINE_LENGTH:
            invalid.append(
                Invalid(f"longer than {MAX_HEADER_LINE_LENGTH} characters: skipped", number)
            )
            continue
        if _PROBABLY_A_PATH.match(line):
            if len(rules) + (current is not None) >= MAX_HEADER_RULES:
                close(number)
                message = (
                    f"more than {MAX_HEADER_RULES} rules: this line and the "
                    f"{len(lines) - index - 1} after it skipped"
                )
                invalid.append(Invalid(message, number, line))
                current = None
                break
            close(number)
            path, error = _url(line, only_relative=False, no_ports=True, keep_query=False)
            if path is not None and _too_complex(path):
                path, error = None, _COMPLEX
            current = None if path is None else (path, line, number, {}, [], [])
            if path is None:
                invalid.append(Invalid(error, number, line))
            continue
        if ":" not in line:
            if current is not None and line.startswith("! "):
                gone = line[2:].strip()
                if _full(current):
                    invalid.append(Invalid(_TOO_MANY, number, line))
                elif not _TOKEN.match(gone.lower()):
                    message = (
                        "expected '! Name', a header name of letters, digits and !#$%&'*+-.^_`|~"
                    )
                    invalid.append(Invalid(message, number, line))
                elif gone.lower() in FRAMING:
                    invalid.append(Invalid(f"! {gone} {_FRAMING_MESSAGE}", number, line))
                else:
                    current[4].append(gone)
                    current[5].append(1)
            elif current is None:
                message = "expected a path starting with / before the headers"
                invalid.append(Invalid(message, number, line))
            else:
                message = "expected 'Name: value' (or '! Name' to remove a header)"
                invalid.append(Invalid(message, number, line))
            continue
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        problem = (
            "a header name without spaces"
            if " " in name
            else "a header name"
            if not name
            else "a header value"
            if not value
            else "a header name of letters, digits and !#$%&'*+-.^_`|~"
            if not _TOKEN.match(name)
            else "a header value of printable Latin-1 characters"
            if not _VALUE.match(value)
            else None
        )
        if problem is None and name in FRAMING:
            invalid.append(Invalid(f"{name} {_FRAMING_MESSAGE}", number, line))
            continue
        if problem is not None:
            invalid.append(Invalid(f"expected {problem}", number, line))
            continue
        if current is None:
            message = f"a header ({name}: {value}) before any path"
            invalid.append(Invalid(message, number, line))
            continue
        if _full(current):
            invalid.append(Invalid(_TOO_MANY, number, line))
            continue
        current[5].append(1)
        values = current[3]
        if name == "set-cookie" and name in values and current[2] != noted_rule:
            noted_rule = current[2]
            folded.append(Invalid(_FOLDED.format(path=current[0]), number, line))
        values[name] = f"{values[name]}, {value}" if name in values else value
    close(len(lines))
    notes = tuple(folded.kept)
    return Parsed(tuple(rules), tuple(invalid.kept), invalid.count, notes, folded.count)


_TOO_MANY = f"more than {MAX_HEADERS_PER_RULE} headers under one path: skipped"


def _too_complex(pattern: str) -> bool:
    path = pattern[len("https://") :] if pattern.startswith("https://") else pattern
    captures = len(PLACEHOLDER.findall(pattern)) + pattern.count("*")
    return captures > MAX_PATTERN_PLACEHOLDERS or path.count("/") > MAX_PATTERN_SEGMENTS


def _full(current: tuple[str, str, int, dict[str, str], list[str], list[int]]) -> bool:
    return len(current[5]) >= MAX_HEADERS_PER_RULE


# workers-shared's parseHeaders joins a rule's repeated names with ", ", Set-Cookie included,
# so Cloudflare sends one "Set-Cookie: a=1, b=2", which a browser reads as one cookie (RFC 6265
# section 3: Set-Cookie is never folded). ember sends the same, so what works locally works
# deployed, and says so. The remedy must survive the upload too: wrangler keys the rules by
# their pattern, so the same pattern written twice keeps only its last rule.
_FOLDED = (
    "a second Set-Cookie under {path}: joined to the first into one header, as on Cloudflare, "
    "which browsers read as one cookie; give each cookie a rule of its own, whose pattern "
    "differs but matches the same paths (a pattern written twice keeps only its last rule)"
)


def warnings(file: str, parsed: Parsed[RedirectRule] | Parsed[HeaderRule]) -> list[str]:
    """One line per skipped line of ``file`` kept, as wrangler lists them (``capped`` adds how
    many more)."""
    return _lines(file, parsed.invalid)


def noted(file: str, parsed: Parsed[RedirectRule] | Parsed[HeaderRule]) -> list[str]:
    """One line per line of ``file`` kept but warned about (``Parsed.notes``), then how many
    more there were."""
    out = _lines(file, parsed.notes)
    more = parsed.noted - len(parsed.notes)
    return [*out, f"{file}: ... and {more} more such lines"] if more > 0 else out


def _lines(file: str, items: tuple[Invalid, ...]) -> list[str]:
    out = []
    for item in items:
        where = f"{file}:{item.line_number}" if item.line_number else file
        out.append(f"{where}: {item.message}" + (f" | {item.line}" if item.line else ""))
    return out


def capped(file: str, notes: list[str], more: int = 0) -> list[str]:
    """At most ``MAX_EXAMPLES`` of a file's warnings, then one line saying how many more."""
    more = max(0, more) + max(0, len(notes) - MAX_EXAMPLES)
    notes = notes[:MAX_EXAMPLES]
    return [*notes, f"{file}: ... and {more} more lines skipped"] if more else notes


def _url(
    token: str, *, only_relative: bool, no_ports: bool, keep_query: bool
) -> tuple[str, str] | tuple[None, str]:
    """``token`` as the platform reads a rule's URL (``validateUrl``): a path, or (where
    allowed) an ``https://`` URL; the path as a URL parser writes it."""
    found = _URL.match(token)
    if found:
        host = found["host"]
        if only_relative:
            return None, f"only paths (starting with /) here, not the URL {token}"
        if no_ports and _PORT.match(host):
            return None, f"no port in a rule's URL: {token}"
        return f"https://{_ascii(host)}{_path('/' + found['path'], keep_query)}", ""
    if only_relative and not token.startswith("/"):
        token = "/" + token
    if token.startswith("/"):
        return _path(token, keep_query), ""
    if only_relative:
        return None, "expected a path starting with /"
    return None, 'expected a path starting with / or a URL starting with "https://"'


def _path(path: str, keep_query: bool) -> str:
    head, hash_mark, fragment = path.partition("#")
    head, question, query = head.partition("?")
    out = quote(head, safe=_PATH_SAFE)
    if keep_query:
        out += question + _ascii(query) + hash_mark + _ascii(fragment)
    return out


def _ascii(text: str) -> str:
    """Printable ASCII kept, anything else percent-encoded (a Location header is bytes)."""
    return quote(text, safe=string.punctuation)
