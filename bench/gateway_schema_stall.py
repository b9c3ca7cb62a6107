"""Does one worker's ``env.AI.run`` with costly schemas stall everyone else on the supervisor?
``ember dev`` of this checkout and of ``--baseline``'s, each serving one worker with two routes:
``/ping`` (answers at once) and ``/heavy`` (an ``env.AI.run`` whose 40 tools carry distinct
patterns of ~13,000 automaton states each: refused past the request's automaton budget, after
compiling up to it) and, over REST, a queued batch of 20 requests of 14 such patterns each whose
last request has a bad field (refused after every request is validated, where each request has a
budget of its own; at the second request, where the batch shares one). Nothing reaches a model.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.gateway_schema_stall --baseline <dir> [--rounds 4]

A phase: a client pings ``/ping`` every 10 ms while another sends ``--calls`` heavy calls and
one batch, one after the other; ``quiet``: the pings alone. Per phase: the pings' latency p50 /
p99 / max, the heavy calls' and the batch's time and outcome. The two sides alternate round by
round. Writes ``bench/results/gateway_schema_stall.json``: the phases, and per side the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai import _stop, _wait_http  # noqa: E402
from bench.ai_load import checkout_commit, load_average  # noqa: E402
from ember.models.pool.launch import free_port  # noqa: E402

MODEL = "@cf/zai-org/glm-4.7-flash"
OUT = ROOT / "bench/results/gateway_schema_stall.json"

WORKER = """
import uuid
from urllib.parse import urlsplit
from workers import Response, WorkerEntrypoint

def tools():
    salt = uuid.uuid4().hex[:8]
    out = []
    for t in range(40):
        props = {f"p{i}": {"type": "string",
                           "pattern": f"^((a|b|c){{1,40}}-){{1,40}}z{salt}{t}_{i}$"}
                 for i in range(10)}
        out.append({"type": "function", "function": {"name": f"f{t}", "strict": True,
            "parameters": {"type": "object", "properties": props, "required": list(props),
                           "additionalProperties": False}}})
    return out

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if urlsplit(request.url).path == "/heavy":
            try:
                await self.env.AI.run("MODEL", {"messages": [{"role": "user", "content": "hi"}],
                                             "tools": tools(), "max_tokens": 4})
                return Response("accepted")
            except Exception as error:
                return Response("refused: " + str(error)[:80])
        return Response("pong")
""".replace("MODEL", MODEL)


def batch_body() -> dict:
    """20 requests of one tool with 14 distinct costly patterns (~180,000 states: each fits a
    budget of its own); the last one's ``temperature`` is a string, so nothing is queued."""
    requests = []
    for r in range(20):
        salt = uuid.uuid4().hex[:8]
        props = {
            f"p{i}": {"type": "string", "pattern": f"^((a|b|c){{1,40}}-){{1,40}}z{salt}_{i}$"}
            for i in range(14)
        }
        parameters = {"type": "object", "properties": props, "required": list(props)}
        tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
        request = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
        requests.append({**request, "temperature": "hot"} if r == 19 else request)
    return {"requests": requests}


class Side:
    """One checkout's ``ember dev`` serving the bench worker."""

    def __init__(self, name: str, code: Path, work: Path) -> None:
        self.name, self.code = name, code
        project = work / name
        project.mkdir()
        (project / "worker.py").write_text(WORKER)
        (project / "ember.yaml").write_text(
            f"name: stall-{name}\nmain: worker.py\ncompatibility_date: '2026-11-01'\n"
            "ai:\n  binding: AI\n"
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ember", "dev", str(project), "--port", str(self.port)]
            + ["--no-watch"],
            cwd=code,
            env={**os.environ, "PYTHONPATH": str(code)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_http(self.url + "/ping")


def _latency(values: list[float]) -> dict:
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"n": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": ordered[-1] * 1000}


async def phase(side: Side, calls: int, heavy: bool) -> dict:
    async with httpx.AsyncClient(timeout=600) as client:
        pings: list[float] = []
        done = asyncio.Event()

        async def pinger() -> None:
            while not done.is_set():
                start = time.perf_counter()
                await client.get(side.url + "/ping")
                pings.append(time.perf_counter() - start)
                await asyncio.sleep(0.01)

        task = asyncio.create_task(pinger())
        out: dict = {"side": side.name, "kind": "heavy" if heavy else "quiet"}
        if heavy:
            times, outcomes = [], set()
            for _ in range(calls):
                start = time.perf_counter()
                reply = await client.get(side.url + "/heavy")
                times.append(time.perf_counter() - start)
                outcomes.add(reply.text[:40])
            start = time.perf_counter()
            rest = f"{side.url}/client/v4/accounts/local/ai/run/{MODEL}?queueRequest=true"
            batch = await client.post(rest, json=batch_body())
            out.update(
                call_ms=[t * 1000 for t in times],
                call_outcomes=sorted(outcomes),
                batch_ms=(time.perf_counter() - start) * 1000,
                batch_outcome=batch.text[:160],
            )
        else:
            await asyncio.sleep(2.0)
        done.set()
        await task
    return {**out, "pings": _latency(pings), "load": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sides = [Side("this", ROOT, work), Side("baseline", args.baseline.resolve(), work)]
        phases = []
        try:
            for round_ in range(args.rounds):
                for side in sides if round_ % 2 == 0 else sides[::-1]:
                    for heavy in (False, True):
                        row = asyncio.run(phase(side, args.calls, heavy))
                        phases.append({"round": round_, **row})
                        print(json.dumps({k: v for k, v in row.items() if k != "batch_outcome"}))
        finally:
            for side in sides:
                _stop(side.process)
    summary = {}
    for side in ("this", "baseline"):
        for kind in ("quiet", "heavy"):
            rows = [p for p in phases if p["side"] == side and p["kind"] == kind]
            summary[f"{side}/{kind}"] = {
                key: statistics.median(p["pings"][key] for p in rows)
                for key in ("p50_ms", "p99_ms", "max_ms")
            }
            if kind == "heavy":
                summary[f"{side}/{kind}"]["batch_ms"] = statistics.median(
                    p["batch_ms"] for p in rows
                )
                summary[f"{side}/{kind}"]["call_ms"] = statistics.median(
                    statistics.median(p["call_ms"]) for p in rows
                )
    result = {
        "this_commit": checkout_commit(ROOT),
        "baseline_commit": checkout_commit(args.baseline),
        "rounds": args.rounds,
        "medians": summary,
        "phases": phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
