"""What a small chat request whose tools carry costly patterns costs the model server to take in:
T tools of P string properties, each with a pattern of ~13,000 automaton states (review33's and
the session's probe), parsed as ``parse_chat_request`` does on every chat request. Before the
per-request automaton budget each tool had a budget of its own, and a body under 64 KiB was
parsed on the event loop: 40 tools (37 KB) held it for ~16 CPU-s.

    PYTHONPATH=. python -m bench.tool_schema_budget                    # this checkout
    PYTHONPATH=. python -m bench.tool_schema_budget --baseline ../old  # and another, alternating

Each case runs in a fresh interpreter (``PYTHONPATH`` set to the checkout, working directory
there), so the other checkout's code is the one measured. CPU seconds of the parse (the
process's own, ``time.process_time``), the body's size and the outcome (accepted, or the
refusal's first words); JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = """
import json, sys, time
from ember.models.api.chat_request import parse_chat_request
tools_n, props_n, strict = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "strict"
tools = []
for t in range(tools_n):
    properties = {f"p{i}": {"type": "string", "pattern": f"^((a|b|c){{1,40}}-){{1,40}}z{t}_{i}$"}
                  for i in range(props_n)}
    parameters = {"type": "object", "properties": properties, "required": list(properties),
                  "additionalProperties": False}
    tools.append({"type": "function",
                  "function": {"name": f"f{t}", "strict": strict, "parameters": parameters}})
body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools, "tool_choice": "required"}
start = time.process_time()
try:
    parse_chat_request(body)
    outcome = "accepted"
except Exception as error:
    outcome = "refused: " + str(error)[:120]
print(json.dumps({"cpu_seconds": time.process_time() - start,
                  "body_bytes": len(json.dumps(body)), "outcome": outcome}))
"""


def run_case(code: Path, tools: int, properties: int, strict: bool, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    case = {"tools": tools, "properties": properties, "strict": strict}
    mode = "strict" if strict else "lenient"
    try:
        done = subprocess.run(
            [sys.executable, "-c", CASE, str(tools), str(properties), mode],
            cwd=code, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {**case, "timed_out": True, "timeout_s": timeout}
    if done.returncode != 0:
        return {**case, "error": done.stderr.strip().splitlines()[-1]}
    return {**case, **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout, measured alternately")
    parser.add_argument("--cases", default="1x10,4x10,40x10", help="TOOLSxPROPERTIES, ...")
    parser.add_argument("--lenient", action="store_true", help="non-strict tools")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/tool_schema_budget.json")
    args = parser.parse_args()
    sides = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    results: dict[str, list[dict]] = {name: [] for name, _ in sides}
    for spec in args.cases.split(","):
        tools, properties = (int(part) for part in spec.split("x"))
        for name, code in sides:
            row = run_case(code, tools, properties, not args.lenient, args.timeout)
            results[name].append(row)
            print(name, json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
