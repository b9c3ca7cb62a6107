"""A deployment's ``_redirects`` and ``_headers``, compiled, and what they do to a request.

As workers-shared's asset worker applies them: a redirect rule is looked up before any asset
(the static rules by exact path, then the dynamic ones in the file's order; first match wins),
and every ``_headers`` rule matching the request's path changes the assets' answer in order
(``! Name`` removes, ``Name: value`` replaces what the assets set, and a name set again by a
later rule gets the new value appended). ``ember dev`` reads the two files from the assets
directory (``directory_rules``, again when they change: ``rule_source.LiveRules``); a deployed
version has their text in its assets config, as wrangler uploads it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ember.bindings.assets.rule_files import (
    HEADERS_FILE,
    MAX_EXAMPLES,
    REDIRECTS_FILE,
    HeaderRule,
    RedirectRule,
    capped,
    noted,
    parse_headers,
    parse_redirects,
    warnings,
)
from ember.bindings.assets.rule_match import Pattern, compile_pattern, replace_within

# ember's, refused at deploy: the platform's own rule limits (2,100 redirect lines, 100 header
# rules of a few lines) keep any valid file far below; 4 MiB of junk lines cost the loop seconds.
MAX_RULES_FILE_BYTES = 1024 * 1024
MAX_RULES_FILE_LINES = 10_000
# ember's caps on what captures substituted into a rule may build (the platform publishes
# none): a Location, one header's value, and all the headers one request's rules set.
MAX_LOCATION_BYTES = 8 * 1024
MAX_HEADER_VALUE_BYTES = 8 * 1024
MAX_ADDED_HEADER_BYTES = 64 * 1024
Headers = tuple[tuple[str, str], ...]
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Redirect:
    """A matched redirect rule: its status and where to (captures substituted)."""

    status: int
    to: str
    # The rule's destination as written starts "//host": another host, the request's scheme
    # (the platform's new URL(to, request.url)). A capture never makes one.
    other_host: bool = False


@dataclass(frozen=True, slots=True)
class AssetRules:
    """Compiled rules of one deployment (``NO_RULES``: neither file)."""

    static: Mapping[str, RedirectRule] = field(default_factory=dict)
    dynamic: tuple[tuple[Pattern, RedirectRule], ...] = ()
    headers: tuple[tuple[Pattern, HeaderRule], ...] = ()
    # What was already logged about this version's rules: each cap's warning once.
    logged: set[str] = field(default_factory=set, compare=False, repr=False)

    def _once(self, key: str, message: str, *args: object) -> None:
        if key not in self.logged:
            self.logged.add(key)
            _log.warning(message, *args)

    def redirect(self, pathname: str) -> Redirect | None:
        """The redirect for the request's ``pathname`` (as sent, percent-encoded)."""
        rule = self.static.get(pathname)
        if rule is not None:
            return _redirect(rule, rule.destination)
        for pattern, rule in self.dynamic:
            captures = pattern.match("", pathname)
            if captures is None:
                continue
            target = replace_within(rule.destination, captures, MAX_LOCATION_BYTES)
            if target is None:  # answered as if no rule matched
                self._once(
                    "location",
                    "_redirects:%d: the destination with its captures is over %d bytes: "
                    "not redirected (ember's limit; logged once per version)",
                    rule.line_number,
                    MAX_LOCATION_BYTES,
                )
                return None
            return _redirect(rule, target.strip())
        return None

    def apply_headers(self, host: str, pathname: str, headers: Headers) -> Headers:
        """``headers`` (lower-case names) as the matching ``_headers`` rules change them, as the
        platform's asset worker does: each rule deletes its ``! Name`` headers, then sets each
        of its own, where a name some earlier rule (or this one) already set is appended to
        instead (``Headers.append``: one value joined with ``, ``, a cookie on its own line).
        One pass over the rules' lines: a list rebuilt per header cost seconds (review14)."""
        if not self.headers:
            return headers
        values: dict[str, list[str]] = {}
        for name, value in headers:
            values.setdefault(name, []).append(value)
        set_here: set[str] = set()
        changed = False
        # Bytes this request's rules send, bounded before any value is built: a name and its
        # value for a header of its own, ", " and the value for one appended to a joined one
        # (a value a later rule removes stays counted: building it was the cost).
        added = 0
        for pattern, rule in self.headers:
            captures = pattern.match(host, pathname)
            if captures is None:
                continue
            changed = True
            for name in rule.unset:
                values.pop(name.lower(), None)
            for name, raw in rule.set:
                value = replace_within(raw, captures, MAX_HEADER_VALUE_BYTES)
                joined = name in set_here and name != "set-cookie" and name in values
                cost = None if value is None else len(value) + (2 if joined else len(name))
                if cost is None or added + cost > MAX_ADDED_HEADER_BYTES:
                    self._skipped(rule, name, value is None)
                    continue
                added += cost
                if name in set_here:
                    values.setdefault(name, []).append(value)  # appended, even after a delete
                    continue
                values.pop(name, None)  # set: replaces what the assets had, last in order
                values[name] = [value]
                set_here.add(name)
        if not changed:
            return headers
        out: list[tuple[str, str]] = []
        for name, parts in values.items():
            if name in set_here and name != "set-cookie" and len(parts) > 1:
                out.append((name, ", ".join(parts)))
            else:
                out.extend((name, part) for part in parts)
        return tuple(out)

    def _skipped(self, rule: HeaderRule, name: str, long_value: bool) -> None:
        if long_value:
            self._once(
                "value",
                "_headers: %s under %s with its captures is over %d bytes: not set "
                "(ember's limit; logged once per version)",
                name,
                rule.path,
                MAX_HEADER_VALUE_BYTES,
            )
        else:
            self._once(
                "total",
                "_headers: a request's rules set over %d bytes of headers: %s under %s and any "
                "past the limit not set (ember's limit; logged once per version)",
                MAX_ADDED_HEADER_BYTES,
                name,
                rule.path,
            )


NO_RULES = AssetRules()
_OTHER_HOST = re.compile(r"^[/\\]{2,}([^/\\?#]*)(.*)$", re.DOTALL)


def _redirect(rule: RedirectRule, target: str) -> Redirect:
    if re.match(r"^\w+://", target):
        return Redirect(rule.status, target)
    other = _OTHER_HOST.match(rule.destination)
    if other is not None:  # the host as written (captures substituted), then the path
        found = _OTHER_HOST.match(target)
        if found is not None and found[1]:
            rest = re.sub("/+", "/", found[2])
            return Redirect(rule.status, f"//{found[1]}{rest}", other_host=True)
    return Redirect(rule.status, re.sub("/+", "/", target))  # a splat's own leading slash


def rules_of(
    redirects: str | None, headers: str | None, html_handling: str
) -> tuple[AssetRules, list[str]]:
    """The compiled rules of the two files' texts (None: no such file), and the warnings
    naming each line skipped, then each kept but warned about (a rule's second Set-Cookie)."""
    notes: list[str] = []
    static: dict[str, RedirectRule] = {}
    dynamic: list[tuple[Pattern, RedirectRule]] = []
    if redirects is not None and (redirects := _within_limits(REDIRECTS_FILE, redirects, notes)):
        parsed = parse_redirects(redirects, html_handling)
        found = warnings(REDIRECTS_FILE, parsed)
        for rule in parsed.rules:
            if not rule.dynamic and not dynamic:
                static[rule.source] = rule
                continue
            if (pattern := compile_pattern(rule.source)) is not None:
                dynamic.append((pattern, rule))
            else:
                found.append(_never(REDIRECTS_FILE, rule.line_number, rule.source))
        notes += capped(REDIRECTS_FILE, found, parsed.skipped - len(parsed.invalid))
    compiled: dict[str, tuple[Pattern, HeaderRule]] = {}
    if headers is not None and (headers := _within_limits(HEADERS_FILE, headers, notes)):
        parsed_headers = parse_headers(headers)
        found = warnings(HEADERS_FILE, parsed_headers)
        repeated: list[str] = []
        for header_rule in parsed_headers.rules:
            if (pattern := compile_pattern(header_rule.path)) is not None:
                # As the platform keys its rules by path: a path twice keeps its first place
                # and its last headers. Silent there; said here, since the earlier rule's
                # headers (a cookie, a CSP) vanish without a trace.
                if header_rule.path in compiled:
                    repeated.append(_repeated(header_rule.path))
                compiled[header_rule.path] = (pattern, header_rule)
            else:
                found.append(_never(HEADERS_FILE, 0, header_rule.path))
        skipped = parsed_headers.skipped - len(parsed_headers.invalid)
        notes += capped(HEADERS_FILE, found, skipped)
        notes += noted(HEADERS_FILE, parsed_headers)
        notes += repeated[:MAX_EXAMPLES]
        if len(repeated) > MAX_EXAMPLES:
            notes.append(f"{HEADERS_FILE}: ... and {len(repeated) - MAX_EXAMPLES} more such paths")
    return AssetRules(static, tuple(dynamic), tuple(compiled.values())), notes


@dataclass(frozen=True, slots=True)
class RuleFile:
    """A rule file as read from disk: its text (a byte that is not UTF-8 read as U+FFFD), and
    its size there (``MAX_RULES_FILE_BYTES`` + 1: larger, not read further)."""

    text: str
    size: int

    def problem(self) -> str | None:
        return rule_file_problem(self.text, self.size)


def rule_file_size(text: str) -> int:
    """A rule file's bytes as its text tells them: UTF-8, each U+FFFD one byte. A reader
    writes one for each byte (or broken sequence) that is not UTF-8, three bytes in UTF-8:
    counted so, a file of such bytes just under 1 MiB was ~3 MiB. (A U+FFFD the file really
    held counts one too: its characters, which cost the parsing, stay within the limit.)"""
    return len(text.encode("utf-8", "replace")) - 2 * text.count("\N{REPLACEMENT CHARACTER}")


def rule_file_problem(text: str, size: int | None = None) -> str | None:
    """What makes a rule file's text too large for ember (None: nothing). ``size``: its bytes
    on disk where they are known (``ember dev``, ``ember deploy``); else ``rule_file_size``."""
    lines = text.count("\n") + (not text.endswith("\n"))  # counted in C, before any parsing
    if lines > MAX_RULES_FILE_LINES:
        return f"at most {MAX_RULES_FILE_LINES:,} lines"
    if size is None:  # a character is at least one byte: a long text is refused unencoded
        too_long = len(text) > MAX_RULES_FILE_BYTES
        size = MAX_RULES_FILE_BYTES + 1 if too_long else rule_file_size(text)
    if size > MAX_RULES_FILE_BYTES:
        return f"at most {MAX_RULES_FILE_BYTES:,} bytes"
    return None


def _within_limits(file: str, text: str, notes: list[str], size: int | None = None) -> str:
    """``text``, or "" (no rules) with a warning when it is past ember's limits."""
    problem = rule_file_problem(text, size)
    if problem is None:
        return text
    notes.append(f"{file}: must be {problem} (ember's limit): all of it ignored")
    return ""


def _repeated(path: str) -> str:
    return (
        f"{HEADERS_FILE}: {path} has more than one rule: only the last one's headers apply, "
        "as on Cloudflare (the platform keeps one rule a path); write them as one rule"
    )


def _never(file: str, line: int, source: str) -> str:
    where = f"{file}:{line}" if line else file
    return f"{where}: {source} never matches (at most one * and each :name once): skipped"


def read_rule_file(directory: Path, name: str) -> RuleFile | None:
    """``directory/name`` (None: there is none, or it is not a file of the directory's own);
    of a file past ``MAX_RULES_FILE_BYTES``, one byte more than that, which its ``problem``
    names."""
    try:
        real = (directory / name).resolve(strict=True)
        if not real.is_relative_to(directory.resolve()) or not real.is_file():
            return None
        with real.open("rb") as handle:
            raw = handle.read(MAX_RULES_FILE_BYTES + 1)
    except OSError:
        return None
    return RuleFile(raw.decode("utf-8", errors="replace"), len(raw))


def directory_rules(directory: Path, html_handling: str) -> tuple[AssetRules, list[str]]:
    """The rules of an assets directory's ``_redirects`` and ``_headers`` as they are now,
    each file held to its limits by its bytes on disk."""
    notes: list[str] = []
    texts: list[str | None] = []
    for name in (REDIRECTS_FILE, HEADERS_FILE):
        found = read_rule_file(directory, name)
        texts.append(None if found is None else _within_limits(name, found.text, notes, found.size))
    rules, more = rules_of(texts[0], texts[1], html_handling)
    return rules, notes + more
