"""The worst ``_redirects`` / ``_headers`` matching cost one request can cause: every rule at
its limits (100 header rules and 2,000 static and 100 dynamic redirect rules, each pattern of
32 placeholders and 64 segments; host rules at the table's budget), built to defeat the quick
rejects (long literals no path holds among them), against a 16 KB path (the longest served).
Each case is the redirect lookup plus the headers applied, the work one request does on the
serving loop.

    python -m bench.asset_rules_worst [--out bench/results/asset_rules_worst.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ember.bindings.assets.rule_files import MAX_PATTERN_PLACEHOLDERS, MAX_PATTERN_SEGMENTS
from ember.bindings.assets.rule_match import MAX_HOST_TABLE
from ember.bindings.assets.rules import AssetRules, rules_of

NAMES = [f"{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"]
PATH_BYTES = 16 * 1024
PLACES, SEGMENTS = MAX_PATTERN_PLACEHOLDERS, MAX_PATTERN_SEGMENTS


def _names(i: int) -> list[str]:
    """Rule ``i``'s 32 placeholder names: distinct within it, the rules' patterns distinct."""
    return [NAMES[(i * PLACES + k) % len(NAMES)] for k in range(PLACES)]


def _segmented(i: int, form: str, splat: bool = False) -> str:
    """A pattern at both limits: 32 placeholders in segments of ``form`` (``x:aa``, ``:aa!``,
    ``:aa-:ab``: the Python segment path, not a run of lone placeholders), then literal
    segments up to 64 (one placeholder fewer with a splat)."""
    names = _names(i)[: PLACES - splat]
    if form == ":a-:b":
        parts = [f":{a}-:{b}" for a, b in zip(names[::2], names[1::2], strict=False)]
    else:
        parts = [form.replace(":aa", f":{name}") for name in names]
    parts += ["s"] * (SEGMENTS - len(parts) - 2 * splat)  # "/*" and a last "/z" with a splat
    return ("/*" if splat else "") + "/" + "/".join(parts)


def _path_for(form: str, count: int) -> str:
    """A 16 KB path every ``_segmented(form)`` rule matches."""
    each = PATH_BYTES // count
    text = {"x:aa": "x" + "z" * each, ":aa!": "z" * each + "!", ":a-:b": "z" * each + "-z"}
    return "/" + "/".join([text[form]] * count + ["s"] * (SEGMENTS - count))


def _adjacent_rule(i: int) -> str:
    """``/:aa:ab:ac...!``: one segment of 32 adjacent placeholders, then a literal."""
    return "/" + "".join(f":{name}" for name in _names(i)) + "!"


def _host_rule(i: int, places: int) -> str:
    """``https://:a-:b-...-*/``: placeholders that stop at ``.`` mixed with a splat (the table)."""
    return "https://" + "".join(f":h{i}x{j}-" for j in range(places)) + "*/"


def _host_at_budget(places: int) -> str:
    """The longest host a ``_host_rule(places)`` is still matched against (within the table)."""
    tokens = 2 * places + 1
    return ("a-" * 500)[: MAX_HOST_TABLE // tokens - 1]


def _dashes(count: int, i: int) -> str:
    """A literal no path of ``-`` holds, which ``rfind`` compared from each position (review18)."""
    return "-" * (count - i % 7) + "~" + "-" * count


def cases() -> dict[str, tuple[AssetRules, str, str]]:
    header = lambda rule: f"{rule}\n  x-a: :{NAMES[0]}\n"  # noqa: E731
    statics = "".join(f"/s{i} /t 301\n" for i in range(2000))
    out = {
        f"headers: 100 rules of {SEGMENTS} segments, {PLACES} x:aa, all match": (
            "".join(header(_segmented(i, "x:aa")) for i in range(100)),
            None,
            _path_for("x:aa", PLACES),
            "example.com",
        ),
        f"headers: 100 rules of {SEGMENTS} segments, {PLACES} :aa!, all match": (
            "".join(header(_segmented(i, ":aa!")) for i in range(100)),
            None,
            _path_for(":aa!", PLACES),
            "example.com",
        ),
        f"headers: 100 rules of {SEGMENTS} segments, {PLACES // 2} :a-:b, all match": (
            "".join(header(_segmented(i, ":a-:b")) for i in range(100)),
            None,
            _path_for(":a-:b", PLACES // 2),
            "example.com",
        ),
        f"headers: 100 rules of {PLACES} adjacent placeholders, all match": (
            "".join(header(_adjacent_rule(i)) for i in range(100)),
            None,
            "/" + "a" * (PATH_BYTES - 2) + "!",
            "example.com",
        ),
        "headers: 100 host rules of 9 :h- and *, host at the table's budget, all match": (
            "".join(f"{_host_rule(i, 9)}\n  x-a: 1\n" for i in range(100)),
            None,
            "/",
            _host_at_budget(9),
        ),
        "headers: 100 host rules of 31 :h- and *, host at the table's budget": (
            "".join(f"{_host_rule(i, 31)}\n  x-a: 1\n" for i in range(100)),
            None,
            "/",
            _host_at_budget(31),
        ),
        "redirects: 100 dynamic, a splat and 64 segments, none match (last segment)": (
            None,
            statics + "".join(f"{_segmented(i, 'x:aa', True)}/z /t\n" for i in range(100)),
            "/q" + _path_for("x:aa", PLACES - 1)[: -2 * 2] + "/y",
            "example.com",
        ),
        "redirects: 100 dynamic of adjacent placeholders, last matches": (
            None,
            statics + "".join(f"{_adjacent_rule(i)} /t/:splat\n" for i in range(100)),
            "/" + "a" * (PATH_BYTES - 2) + "!",
            "example.com",
        ),
        "headers: 100 rules :aa, 990 -, ~, 990 -, :ab against a path of - (review18)": (
            "".join(
                f"/:{NAMES[2 * i]}{_dashes(990, i)}:{NAMES[2 * i + 1]}\n  x-a: 1\n"
                for i in range(100)
            ),
            None,
            "/" + "-" * (PATH_BYTES - 1),
            "example.com",
        ),
        "redirects: 100 dynamic :aa, 485 -, ~, 485 -, :ab against a path of - (review18)": (
            None,
            "".join(
                f"/:{NAMES[2 * i]}{_dashes(485, i)}:{NAMES[2 * i + 1]} /x 302\n" for i in range(100)
            ),
            "/" + "-" * (PATH_BYTES - 1),
            "example.com",
        ),
    }
    built = {}
    for name, (headers, redirects, path, host) in out.items():
        rules, notes = rules_of(redirects, headers, "auto-trailing-slash")
        assert not notes, notes[:2]
        built[name] = (rules, path, host)
    return built


def measure(rules: AssetRules, path: str, host: str, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        rules.redirect(path)
        rules.apply_headers(host, path, (("content-type", "text/plain"),))
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("bench/results/asset_rules_worst.json"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = {
        name: round(measure(rules, path, host, args.rounds) * 1000, 3)
        for name, (rules, path, host) in cases().items()
    }
    for name, ms in results.items():
        print(f"{ms:9.3f} ms  {name}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"path_bytes": PATH_BYTES, "ms_per_request": results}, indent=2))


if __name__ == "__main__":
    main()
