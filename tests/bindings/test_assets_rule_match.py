"""The ``_redirects`` / ``_headers`` pattern matcher against the platform's regular expression,
on random rules and paths, and on a rule that makes that expression backtrack."""

from __future__ import annotations

import random

from ember.bindings.assets.rule_match import (
    compile_pattern,
    match_reference,
    replace,
)

ALPHABET = "ab/.-"
PIECES = ["*", ":a", ":b", ":c1", "a", "b", "/", ".", "-", "ab", "/a"]


def _rule(rng: random.Random) -> str:
    head = rng.choice(["/", "/", "https://:s.", "https://h"])
    return head + "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))


def test_the_matcher_agrees_with_the_regular_expression_on_random_rules() -> None:
    rng = random.Random(20261206)
    checked = matched = 0
    for _ in range(6000):
        rule = _rule(rng)
        pattern = compile_pattern(rule)
        host = rng.choice(["h", "x.h", "a.b"])
        path = "/" + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 10)))
        expected = match_reference(rule, host, path)
        got = pattern.match(host, path) if pattern else None
        assert got == expected, (rule, host, path)
        checked += 1
        matched += expected is not None
    assert matched > 150  # the random rules do match, often enough to test the captures


def test_a_rule_that_makes_the_regular_expression_backtrack_is_matched_at_once() -> None:
    rule = "/" + "".join(f":p{i}" for i in range(12)) + "!"
    pattern = compile_pattern(rule)
    assert pattern is not None
    # The backtracking expression would try about 5000^12 splits of this segment.
    assert pattern.match("h", "/" + "a" * 5000) is None
    assert pattern.match("h", "/" + "a" * 5000 + "!") is not None


def test_two_splats_or_a_name_twice_never_match_as_on_the_platform() -> None:
    assert compile_pattern("/a/*/b/*") is None
    assert compile_pattern("/:id/x/:id") is None
    assert compile_pattern("/:splat/*") is None


def test_captures_and_replacement() -> None:
    pattern = compile_pattern("/blog/:year/*")
    assert pattern is not None
    captures = pattern.match("h", "/blog/2024/a/b.html")
    assert captures == {"year": "2024", "splat": "a/b.html"}
    assert replace("/posts/:year/:splat?x=:none", captures) == "/posts/2024/a/b.html?x=:none"
    assert replace("/:id_2/:id", {"id": "1", "id_2": "2"}) == "/2/1"
    host = compile_pattern("https://:sub.example.com/*")
    assert host is not None and host.cross_host
    assert host.match("docs.example.com", "/x") == {"sub": "docs", "splat": "x"}
    assert host.match("a.b.example.com", "/x") is None
