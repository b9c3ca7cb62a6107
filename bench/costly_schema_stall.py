"""Does a costly new schema stall everybody's decoding? Plain streams' inter-token latency while
clients keep sending schemas never seen before whose patterns build nearly a request's whole
automaton budget (14 string properties, each a pattern of ~13,000 states, as
bench/tool_schema_budget.py's tools: ~0.9 CPU-s to compile in Python), on this checkout's
model server and on ``--baseline``'s, one server each, phases alternating round by round so
both run under the same load.

    git archive main | tar -x -C /tmp/base-main
    PYTHONPATH=. python -m bench.costly_schema_stall --baseline /tmp/base-main --baseline-commit X

A phase: ``--streams`` streamed completions of ``--tokens`` tokens (greedy, ``ignore_eos``) run
to the end while ``--senders`` clients each send, one after the other, 4-token completions
constrained to such a schema. Per phase: the streams' chunk gaps (ITL) p50 / p99 / max, the
costly requests answered, and the chunks per second all streams got while a costly request was
in flight, beside their rate over the whole phase. A ``quiet`` phase (the streams alone) per
side gives the floor. Then per side the server process's own CPU-s per costly request
(``/proc``: utime + stime of the server process, not of its children such as a compile
worker), over ``--cpu-requests`` sent one at a time with no streams. JSON to
``bench/results/costly_schema_stall.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.ai import _wait_http, checkpoint
from bench.ai_load import checkout_commit, load_average
from bench.grammar_stall import RESULTS, ROOT, Server, rotate_rounds

PROPERTIES = 14
_tags = itertools.count()


def costly_schema() -> dict:
    """A schema no request sent before: ``PROPERTIES`` patterns of ~13,000 states each."""
    tag = next(_tags)
    properties = {
        f"p{i}": {"type": "string", "pattern": f"^((a|b|c){{1,40}}-){{1,40}}z{tag}_{i}$"}
        for i in range(PROPERTIES)
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _body() -> dict:
    return {
        "prompt": "value: ",
        "max_tokens": 4,
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "c", "schema": costly_schema()},
        },
    }


async def _stream(client: httpx.AsyncClient, tokens: int, seed: int) -> list[float]:
    """One plain streamed completion: its chunks' arrival times."""
    body = {
        "prompt": f"def f{seed}(",
        "max_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
    }
    arrivals: list[float] = []
    async with client.stream("POST", "/v1/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                arrivals.append(time.perf_counter())
    return arrivals


async def _sender(
    client: httpx.AsyncClient, stop: asyncio.Event, spans: list[tuple[float, float]]
) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        response = await client.post("/v1/completions", json=_body())
        response.raise_for_status()
        spans.append((started, time.perf_counter()))


async def phase(url: str, args: argparse.Namespace, senders: int) -> dict:
    limits = httpx.Limits(max_connections=args.streams + senders + 4)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        stop, spans = asyncio.Event(), []
        flood = [asyncio.create_task(_sender(client, stop, spans)) for _ in range(senders)]
        if senders:
            await asyncio.sleep(0.2)  # the schemas are flowing before the streams start
        streams = await asyncio.gather(
            *(_stream(client, args.tokens, i) for i in range(args.streams))
        )
        stop.set()
        await asyncio.gather(*flood)
    itl = sorted((b - a) * 1e3 for s in streams for a, b in itertools.pairwise(s))
    arrivals = sorted(t for s in streams for t in s)
    first, last = arrivals[0], arrivals[-1]
    # The streams' chunks per second while a costly request was in flight (its span clipped
    # to the streams' run), beside their rate over the whole run.
    clipped = [(max(a, first), min(b, last)) for a, b in spans if b > first and a < last]
    during = sum(1 for t in arrivals if any(a <= t <= b for a, b in clipped))
    busy = sum(b - a for a, b in clipped)
    return {
        "itl_p50_ms": round(statistics.median(itl), 2),
        "itl_p99_ms": round(itl[int(0.99 * (len(itl) - 1))], 2),
        "itl_max_ms": round(itl[-1], 2),
        "costly_requests": len(spans),
        "costly_latency_p50_ms": (
            round(statistics.median((b - a) * 1e3 for a, b in spans), 1) if spans else None
        ),
        "chunks_per_s_during_costly": round(during / busy, 1) if busy else None,
        "chunks_per_s_overall": round(len(arrivals) / (last - first), 1),
    }


def own_cpu_seconds(pid: int) -> float:
    """utime + stime of the process alone (not its children)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_request(server: Server, count: int) -> float:
    before = own_cpu_seconds(server.process.pid)
    with httpx.Client(base_url=server.url, timeout=300) as client:
        for _ in range(count):
            client.post("/v1/completions", json=_body()).raise_for_status()
    return round((own_cpu_seconds(server.process.pid) - before) / count, 3)


def summary(phases: list[dict]) -> list[dict]:
    out = []
    keys = ("itl_p50_ms", "itl_p99_ms", "itl_max_ms", "costly_requests")
    keys += ("costly_latency_p50_ms", "chunks_per_s_during_costly", "chunks_per_s_overall")
    for side, kind in itertools.product(("baseline", "this"), ("quiet", "costly")):
        rows = [p for p in phases if p["side"] == side and p["kind"] == kind]
        if rows:
            row: dict = {"side": side, "kind": kind, "rounds": len(rows)}
            for key in keys:
                values = [r[key] for r in rows if r[key] is not None]
                row[key] = round(statistics.median(values), 2) if values else None
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--baseline-commit", help="recorded for a baseline that is no git checkout")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--senders", type=int, default=1)
    parser.add_argument("--cpu-requests", type=int, default=5)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "costly_schema_stall.json")
    args = parser.parse_args()
    phases: list[dict] = []
    loads = [load_average()]
    cpu: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        ckpt = checkpoint(Path(scratch))
        servers = [
            Server("baseline", args.baseline.resolve(), ckpt, args),
            Server("this", ROOT, ckpt, args),
        ]
        try:
            for server in servers:
                _wait_http(server.url + "/health")
                asyncio.run(phase(server.url, argparse.Namespace(**{**vars(args), "tokens": 8}), 1))
            rotate_rounds(servers, ("costly", "quiet"), args, phase, phases, loads)
            for server in servers:
                cpu[server.name] = cpu_per_request(server, args.cpu_requests)
                print(f"  {server.name:<8} server CPU-s per costly request: {cpu[server.name]}")
        finally:
            for server in servers:
                server.stop()
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "baseline_commit": args.baseline_commit or checkout_commit(args.baseline),
        "this_commit": checkout_commit(ROOT),
        "settings": {
            k: v for k, v in vars(args).items() if k not in ("baseline", "baseline_commit", "out")
        }
        | {"properties": PROPERTIES},
        "cpus": os.cpu_count(),
        "load_average_per_round": loads,
        "phases": phases,
        "summary": summary(phases),
        "server_cpu_seconds_per_costly_request": cpu,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for row in data["summary"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
