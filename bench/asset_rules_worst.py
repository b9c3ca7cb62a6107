"""The worst ``_redirects`` / ``_headers`` matching cost one request can cause: every rule at
its limits (100 header rules of 2,000 characters, 2,000 static and 100 dynamic redirect rules of
1,000), built to defeat the quick rejects, against a 16 KB path. Each case is the redirect
lookup plus the headers applied, the work one request does on the serving loop.

    python -m bench.asset_rules_worst [--out bench/results/asset_rules_worst.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ember.bindings.assets.rules import AssetRules, rules_of

NAMES = [f"{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"]
PATH_BYTES = 16 * 1024


def _fit(text: str, limit: int) -> str:
    return text[:limit].rsplit("/", 1)[0] if len(text) > limit else text


def _segments_rule(i: int, limit: int, splat: bool = False) -> str:
    """``/:aa/:ab/...`` (or ``/*/:aa/...``): as many segments as the line allows."""
    body = "".join(f"/:{name}" for name in NAMES[i : i + 700])
    return _fit(("/*" if splat else "") + body, limit)


def _adjacent_rule(i: int, limit: int) -> str:
    """``/:aa:ab:ac...!``: one segment of adjacent placeholders, then a literal."""
    body = "/" + "".join(f":{name}" for name in NAMES[i : i + 700])
    return body[: limit - 1].rsplit(":", 1)[0] + "!"


def cases() -> dict[str, tuple[AssetRules, str]]:
    seg = _segments_rule(0, 1990)
    count = seg.count("/")
    each = PATH_BYTES // count - 1
    segmented = "/" + "/".join(["x" * each] * count)  # every segment rule matches
    flat = "/" + "a" * (PATH_BYTES - 2) + "!"  # every adjacent rule matches
    many = "/" + "/".join(["y"] * (PATH_BYTES // 2))
    header = lambda rule: f"{rule}\n  x-a: :{NAMES[0]}\n"  # noqa: E731
    statics = "".join(f"/s{i} /t 301\n" for i in range(2000))
    out = {
        "headers: 100 rules of ~497 segments, all match": (
            "".join(header(_segments_rule(i, 1990)) for i in range(100)),
            None,
            segmented,
        ),
        "headers: 100 rules of ~497 adjacent placeholders, all match": (
            "".join(header(_adjacent_rule(i, 1990)) for i in range(100)),
            None,
            flat,
        ),
        "redirects: 100 dynamic splat + ~250 segments, none match (last segment)": (
            None,
            statics + "".join(f"{_segments_rule(i, 990, True)}/z /t\n" for i in range(100)),
            many,
        ),
        "redirects: 100 dynamic of adjacent placeholders, last matches": (
            None,
            statics + "".join(f"{_adjacent_rule(i, 990)} /t/:splat\n" for i in range(100)),
            "/" + "a" * (PATH_BYTES - 2) + "!",
        ),
    }
    built = {}
    for name, (headers, redirects, path) in out.items():
        rules, notes = rules_of(redirects, headers, "auto-trailing-slash")
        assert not notes, notes[:2]
        built[name] = (rules, path)
    return built


def measure(rules: AssetRules, path: str, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        rules.redirect(path)
        rules.apply_headers("example.com", path, (("content-type", "text/plain"),))
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("bench/results/asset_rules_worst.json"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = {
        name: round(measure(rules, path, args.rounds) * 1000, 3)
        for name, (rules, path) in cases().items()
    }
    for name, ms in results.items():
        print(f"{ms:9.3f} ms  {name}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"path_bytes": PATH_BYTES, "ms_per_request": results}, indent=2))


if __name__ == "__main__":
    main()
