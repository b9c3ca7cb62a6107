"""What one ``response_format`` schema costs the model server to take in: a JSON schema with N
optional properties (review26's worst case: the event loop compiled it while other streams
waited), parsed and compiled as ``parse_response_format`` does on every request.

    PYTHONPATH=. python -m bench.schema_compile                       # this checkout
    PYTHONPATH=. python -m bench.schema_compile --baseline ../old     # and another, alternating

Each case runs in a fresh interpreter (``PYTHONPATH`` set to the checkout, working directory
there), so the other checkout's code is the one measured; a case past ``--timeout`` is recorded
as such. Wall seconds and how much the process's peak RSS grew while compiling, per case;
JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = """
import json, resource, sys, time
from ember.models.api.tools import parse_response_format
n = int(sys.argv[1])
properties = {f"{j:06d}_" + format(j * 2654435761 % 2**64, "016x"): {"type": "boolean"}
              for j in range(n)}
body = {"type": "json_schema",
        "json_schema": {"name": "x", "schema": {"type": "object", "properties": properties}}}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
parse_response_format(body, "/response_format")
seconds = time.perf_counter() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"seconds": seconds, "peak_rss_growth_bytes": grown * 1024,
                  "schema_bytes": len(json.dumps(body))}))
"""


def run_case(code: Path, n: int, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    try:
        done = subprocess.run(
            [sys.executable, "-c", CASE, str(n)],
            cwd=code, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"properties": n, "timed_out": True, "timeout_s": timeout}
    if done.returncode != 0:
        return {"properties": n, "error": done.stderr.strip().splitlines()[-1]}
    return {"properties": n, **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout, measured alternately")
    parser.add_argument("--sizes", default="250,500,1000,2000,4900")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/schema_compile.json")
    args = parser.parse_args()
    sides = {"this": ROOT}
    if args.baseline is not None:
        sides = {"baseline": args.baseline.resolve(), **sides}
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for n in (int(s) for s in args.sizes.split(",")):
        for side, code in sides.items():
            case = run_case(code, n, args.timeout)
            results[side].append(case)
            shown = (
                "timed out"
                if case.get("timed_out")
                else case.get("error")
                or f"{case['seconds']:.3f} s, RSS +{case['peak_rss_growth_bytes'] >> 20} MiB"
            )
            print(f"{side:>8}  {n:>5} optional properties: {shown}", flush=True)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average": os.getloadavg(),
        "timeout_s": args.timeout,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
