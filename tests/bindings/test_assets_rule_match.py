"""The ``_redirects`` / ``_headers`` pattern matcher against the platform's regular expression,
on random rules and paths, and on a rule that makes that expression backtrack."""

from __future__ import annotations

import random

from ember.bindings.assets.rule_match import compile_pattern, match_reference, replace
from ember.bindings.assets.search_back import last_before, reversed_for_search

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


NAMES = [f"{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"]


def _placeholders(start: int, count: int, limit: int) -> str:
    """``/:aa/:ab/...`` of at most ``limit`` characters (whole segments)."""
    rule = "/" + "/".join(":" + name for name in NAMES[start : start + count])
    return rule[:limit].rsplit("/", 1)[0]


def test_a_long_path_against_rules_of_hundreds_of_placeholders() -> None:
    # review14: 7 rules of ~497 placeholder segments and one 14 KB path filled a 497 x 14,000
    # table per rule on the serving loop (21.8 s; every tenant waited).
    rules = [_placeholders(i, 660, 1990) for i in range(7)]
    patterns = [compile_pattern(rule) for rule in rules]
    assert all(p is not None for p in patterns)
    sizes = [rule.count("/") for rule in rules]
    for segments in (7000, sizes[0], sizes[0] - 1):
        path = "/" + "/".join(["x"] * segments)
        for rule, pattern, size in zip(rules, patterns, sizes, strict=True):
            assert pattern is not None
            got = pattern.match("h", path)
            if segments != size:
                assert got is None
                continue
            assert got is not None and set(got) == {p[1:] for p in rule.split("/")[1:]}
            assert set(got.values()) == {"x"}


def test_adjacent_placeholders_share_a_segment_as_the_regular_expression_does() -> None:
    rule = "/" + "".join(f":{name}" for name in NAMES[:300]) + "!"
    pattern = compile_pattern(rule)
    assert pattern is not None
    assert pattern.match("h", "/" + "a" * 16000) is None
    got = pattern.match("h", "/" + "a" * 16000 + "!")
    assert got is not None
    assert got[NAMES[0]] == "a" * (16000 - 299)  # the first takes all the rest leave it
    assert all(got[name] == "a" for name in NAMES[1:300])
    short = compile_pattern("/:a:b-:c:d")
    assert short is not None
    assert short.match("h", "/xy-z-w") == match_reference("/:a:b-:c:d", "h", "/xy-z-w")


def test_a_splat_among_many_segments_captures_what_lies_between() -> None:
    rule = "/s/:a/*" + "".join(f"/:{name}" for name in NAMES[:200]) + "/end"
    pattern = compile_pattern(rule)
    assert pattern is not None
    path = "/s/1/" + "m/" * 5000 + "/".join(["v"] * 200) + "/end"
    small = "/s/1/" + "m/" * 50 + "/".join(["v"] * 200) + "/end"
    assert pattern.match("h", small) == match_reference(rule, "h", small)
    got = pattern.match("h", path)
    assert got is not None
    assert got["a"] == "1" and got["splat"] == ("m/" * 5000)[:-1]
    assert pattern.match("h", path[:-1]) is None
    assert pattern.match("h", "/s/1/" + "/".join(["v"] * 200) + "/end") is None


def test_longer_random_rules_and_paths_agree_with_the_regular_expression() -> None:
    rng = random.Random(614)
    pieces = [*PIECES, "*", ":d", "/:e", "x"]
    matched = 0
    for _ in range(4000):
        head = rng.choice(["/", "/", "https://:s.", "https://*", "https://:s", "/*"])
        rule = head + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        pattern = compile_pattern(rule)
        host = rng.choice(["h", "x.h", "a.b", "ab"])
        path = "/" + "".join(rng.choice(ALPHABET + "x") for _ in range(rng.randint(0, 16)))
        expected = match_reference(rule, host, path)
        assert (pattern.match(host, path) if pattern else None) == expected, (rule, host, path)
        matched += expected is not None
    assert matched > 150


def test_the_linear_last_match_agrees_with_rfind_on_random_input() -> None:
    rng = random.Random(1806)
    for _ in range(3000):
        text = "".join(rng.choice("-~a") for _ in range(rng.randint(0, 40)))
        literal = "".join(rng.choice("-~a") for _ in range(rng.randint(1, 5)))
        limit = rng.randint(len(literal), max(len(text), len(literal)))
        backwards = reversed_for_search(text, (literal,))
        assert last_before(backwards, len(text), literal, limit) == text.rfind(literal, 0, limit), (
            text,
            literal,
            limit,
        )
    # Past the size where the reversed text is padded for the linear search.
    text = "-" * 40_000 + "~" + "-" * 3000
    for literal in ("-" * 990 + "~" + "-" * 990, "-~-", "~" + "-" * 5000, "\x00"):
        backwards = reversed_for_search(text, (literal, "-" * 99))
        for limit in (len(text), 41_500, 40_990, 1000):
            got = last_before(backwards, len(text), literal, limit)
            assert got == text.rfind(literal, 0, limit), (literal[:8], limit)


def test_rules_with_long_literals_against_a_long_path_match_as_the_reference() -> None:
    # review18: rfind compared the 1,981-character literal from each position of the path.
    literal = "-" * 990 + "~" + "-" * 990
    rule = f"/:aa{literal}:ab"
    pattern = compile_pattern(rule)
    assert pattern is not None
    assert pattern.match("h", "/" + "-" * 16_000) is None
    path = "/" + "-" * 8000 + "~" + "-" * 8000
    assert pattern.match("h", path) == {"aa": "-" * 7010, "ab": "-" * 7010}
    short = "/" + "-" * 1200 + "~" + "-" * 1000
    assert pattern.match("h", short) == match_reference(rule, "h", short)
