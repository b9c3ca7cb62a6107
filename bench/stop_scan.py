"""What a stop regex (SGLang's ``stop_regex``) costs per character of output: ``StopScan.feed``
(its targets kept by character class, constrain/stop_regex.py) against ``step_reference`` (each
edge's class tested for each character), on the same automaton and text, for usual patterns and
for hostile ones at the caps (512 states, 2,048 edge targets), over ASCII prose, one repeated
letter and Chinese text.

    PYTHONPATH=. python -m bench.stop_scan [--out bench/results/stop_scan.json]

CPU µs a character (``time.process_time``, best of ``--repeat``), both paths in one process and
one run, so their ratio is what to read on a noisy machine.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from ember.models.constrain.stop_regex import (
    StopScan,
    compile_stop_regex,
    edge_targets,
    step_reference,
)

ROOT = Path(__file__).resolve().parents[1]

PATTERNS = [
    ("usual: Observation:|Final Answer:", "Observation:|Final Answer:"),
    ("usual: \\n\\n+", "\\n\\n+"),
    ("usual: </?(answer|tool_call)>", "</?(answer|tool_call)>"),
    ("8 words of 22 letters", "|".join(f"word{i:02d}" + "x" * 16 for i in range(8))),
    ("(a?){62}\\0 (targets cap)", "(a?){62}\\x00"),
    ("[^\\0]{246}\\0 (states cap)", "[^\\x00]{246}\\x00"),
    ("[a-h].{245}", "[a-h].{245}"),
    ("(one of 248 CJK letters)X", "(?:" + "|".join(chr(0x4E00 + i) for i in range(248)) + ")X"),
]


def _texts(length: int) -> dict[str, str]:
    rng = random.Random(7)
    words = ["the", "model", "answer", "is", "a", "tool_call", "Observation:", "x", "\n"]
    prose = " ".join(rng.choice(words) for _ in range(length))[:length]
    return {
        "prose": prose,
        "one letter": "a" * length,
        "Chinese": "".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(length)),
    }


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def measure(repeat: int, length: int) -> list[dict]:
    rows = []
    texts = _texts(length)
    for name, pattern in PATTERNS:
        regex = compile_stop_regex(pattern)
        automaton = regex.automaton
        for text_name, text in texts.items():
            scan_s = _best(lambda: StopScan(regex).feed(text), repeat)  # noqa: B023
            reference_s = _best(
                lambda: step_reference(automaton, automaton.start, text),  # noqa: B023
                repeat,
            )
            rows.append(
                {
                    "pattern": name,
                    "text": text_name,
                    "states": len(automaton.edges),
                    "edge_targets": edge_targets(automaton),
                    "scan_us_per_char": round(scan_s * 1e6 / len(text), 2),
                    "reference_us_per_char": round(reference_s * 1e6 / len(text), 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chars", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/stop_scan.json")
    args = parser.parse_args()
    rows = measure(args.repeat, args.chars)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
