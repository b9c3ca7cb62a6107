"""What a regex automaton's build costs per unit of the request budget's measure, by pattern
family: CPU µs per state and per unit of ``RegexAutomaton.work`` (regex_nfa.py), and bytes per
unit, held by the automaton once built (what the process's cache keeps) and at the build's
peak. A measure that bounds CPU and memory has about the same µs and bytes per unit for every
family; states alone did not (a wide alternation under a star: 50x the others, review39), nor
did states, closure visits and edges without the pattern's text and classes (empty groups in a
row, a class of many code points, a long literal: review41).

    PYTHONPATH=. python -m bench.regex_work [--out bench/results/regex_work.json]
    PYTHONPATH=<other checkout> python bench/regex_work.py --out X.json  # its build

Each family is parsed and built ``--repeat`` times in this process (best CPU time kept,
``time.process_time``), then once more under ``tracemalloc`` for its bytes (apart: tracing
slows the build several times over).
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from pathlib import Path

from ember.models.constrain.formats import FORMAT_PATTERNS
from ember.models.constrain.number_ranges import integer_regex, number_regex
from ember.models.constrain.number_schema import numeric_range
from ember.models.constrain.regex_nfa import compile_regex

ROOT = Path(__file__).resolve().parents[1]


def _alts(k: int) -> str:
    return "(?:" + "|".join(chr(0x100 + i) for i in range(k)) + ")*"


def _singles(count: int) -> str:
    """A class of ``count`` code points, none adjacent: a range apiece."""
    return "[" + "".join(chr(0x100 + 2 * i) for i in range(count)) + "]"


def families() -> list[tuple[str, str, bool, tuple[int, int | None]]]:
    number = number_regex(numeric_range({"maximum": 12345.5}, ""))  # type: ignore[arg-type]
    between = number_regex(numeric_range({"minimum": -3.25, "maximum": 98765.125}, ""))  # type: ignore[arg-type]
    integer = integer_regex(-(10**9), 10**12)
    assert number and between and integer
    return [
        ("number maximum 12345.5", number, False, (0, None)),
        ("number -3.25..98765.125", between, False, (0, None)),
        ("integer -1e9..1e12", integer, False, (0, None)),
        ("format date-time", FORMAT_PATTERNS["date-time"], True, (0, None)),
        ("format uuid", FORMAT_PATTERNS["uuid"], True, (0, None)),
        ("format email maxLength 64", FORMAT_PATTERNS["email"], True, (0, 64)),
        ("^[0-9a-f]{1000}-x$", "^[0-9a-f]{1000}-x$", True, (0, None)),
        ("((a|b|c){1,40}-){1,40}", "^((a|b|c){1,40}-){1,40}$", True, (0, None)),
        ("[a-z]+ minLength 5 maxLength 400", "^[a-z]+$", True, (5, 400)),
        ("(30 alts)* maxLength 400", _alts(30), True, (0, 400)),
        ("(300 alts)* maxLength 50", _alts(300), True, (0, 50)),
        ("(1000 alts)* maxLength 25", _alts(1000), True, (0, 25)),
        ("(2000 alts)* maxLength 12", _alts(2000), True, (0, 12)),
        ("^(?:a?){1000}$ (closures of 1000)", "^(?:a?){1000}$", True, (0, None)),
        ("^(?:a?b?){500}$", "^(?:a?b?){500}$", True, (0, None)),
        ("(?:a?){30} maxLength 250", "(?:a?){30}", True, (0, 250)),
        # review41: families whose cost the count missed (text, classes, epsilon chains).
        ("() x 8000 (an epsilon chain)", "^" + "()" * 8000 + "a$", True, (0, None)),
        ("(?:) x 8000", "^" + "(?:)" * 8000 + "a$", True, (0, None)),
        ("literal of 50,000", "^" + "a" * 50_000 + "$", True, (0, None)),
        ("astral literal of 50,000", "^" + "\U0001d538" * 50_000 + "$", True, (0, None)),
        ("class of 20,000 code points", "^" + _singles(20_000) + "$", True, (0, None)),
        ("negated class of 20,000", "^[^" + _singles(20_000)[1:] + "$", True, (0, None)),
        ("class of 10,000 \\W", "^[" + "\\W" * 10_000 + "]$", True, (0, None)),
        ("a{ x 20,000 (literal braces)", "^" + "a{" * 20_000 + "}$", True, (0, None)),
        (
            "199 words of 1-199 a's",
            "^(?:" + "|".join("a" * i for i in range(1, 200)) + ")$",
            True,
            (0, None),
        ),
        ("(a|a|...) x 3000 *", "^(?:" + "|".join(["a"] * 3000) + ")*$", True, (0, None)),
        ("(a{1,50}){1,50}", "^(a{1,50}){1,50}$", True, (0, None)),
        # review43: leading anchors were stripped one pop(0) at a time (quadratic), and wide
        # alternations of tiny branches cost ~2x the others a unit.
        ("^ x 200,000 then a", "^" * 200_000 + "a", True, (0, None)),
        ("\\A x 100,000 then a", "\\A" * 100_000 + "a", True, (0, None)),
        ("a| x 50,000", "a|" * 50_000 + "a", True, (0, None)),
    ]


def _bytes(pattern: str, search: bool, length: tuple[int, int | None]) -> tuple[int, int]:
    """Bytes the built automaton holds, and the build's peak (both past what was before)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        built = compile_regex(pattern, search=search, length=length)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del built
    return held - base, peak - base


def measure(repeat: int) -> list[dict]:
    rows = []
    for name, pattern, search, length in families():
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            built = compile_regex(pattern, search=search, length=length)
            best = min(best, time.process_time() - start)
        states = len(built.edges)
        work = getattr(built, "work", None)  # None: a checkout from before the work count
        del built
        held, peak = _bytes(pattern, search, length)
        rows.append(
            {
                "family": name,
                "chars": len(pattern),
                "states": states,
                "work": work,
                "cpu_ms": round(best * 1e3, 2),
                "us_per_state": round(best * 1e6 / states, 2),
                "us_per_work": None if work is None else round(best * 1e6 / work, 3),
                "held_bytes_per_work": None if work is None else round(held / work),
                "peak_bytes_per_work": None if work is None else round(peak / work),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/regex_work.json")
    args = parser.parse_args()
    rows = measure(args.repeat)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
