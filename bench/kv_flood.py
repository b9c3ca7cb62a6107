"""Does one account's KV write flood stall everybody's KV? A victim worker's ``KV.get`` and
``KV.put`` latency on ``ember serve`` while another account's workers ``KV.put`` in a loop, on
this checkout's platform and on ``--baseline``'s (a checkout from before KV reads and writes were
scheduled apart and fairly), one platform each, their phases alternating round by round.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.kv_flood --baseline <dir> --baseline-commit <commit>

Each platform serves two permanent accounts, each with a KV namespace: ``victim`` (one worker:
``/get`` reads a stored key, ``/put`` writes a fresh key) and ``flood`` (one worker: each request
writes ``--puts`` fresh keys one after the other, so every write commits on its own). A phase
runs ``--seconds``: ``--victim-connections`` keep-alive connections each send the victim's
``get`` or ``put`` requests one after the other, and in ``flood`` phases ``--flood-connections``
more connections keep the flooder's requests coming (``quiet``: none). Per phase: the victim's
get and put p50 / p99 latency (ms, per request: one KV operation each) and the flooder's KV
writes per second. Writes ``bench/results/kv_flood.json``: the phases, and per side and kind
the medians.

``--mode large``: the flooder sends large values instead, over the KV REST API (``PUT
.../values/{key}``, ``--value-bytes`` each, one key per connection, overwritten), on
``--flood-connections`` connections; its figure is then large puts per second. Written to
``bench/results/kv_flood_large.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.platform_ab import ServePlatform, ab_arguments, keepalive_client, run_ab  # noqa: E402
from tests.serve.conftest import upload  # noqa: E402

RESULTS = ROOT / "bench" / "results"
VICTIM = """\
import itertools
from workers import Response

FRESH = itertools.count()


async def on_fetch(request, env):
    if request.url.endswith("/put"):
        await env.KV.put(f"v{next(FRESH)}", "x" * 100)  # a fresh key: no 1/s-per-key refusal
        return Response("put")
    value = await env.KV.get("stored")
    return Response(value or "missing")
"""
FLOODER = """\
import itertools
import os
from workers import Response

FRESH = itertools.count()
PREFIX = os.urandom(4).hex()


async def on_fetch(request, env):
    for _ in range({puts}):
        await env.KV.put(f"{{PREFIX}}-{{next(FRESH)}}", "x" * 100)
    return Response("flooded")
"""
KINDS = ("quiet", "flood")


class Platform(ServePlatform):
    """One checkout's ``ember serve`` with the victim's and the flooder's workers."""

    def __init__(self, name: str, code: Path, scratch: Path, args: argparse.Namespace) -> None:
        super().__init__(name, code, scratch)
        self._deploy("victim", "app", VICTIM, seed=True)
        self.flood_values, self.flood_auth = self._deploy(
            "flood", "writer", FLOODER.format(puts=args.puts)
        )

    def _deploy(
        self, account: str, name: str, source: str, seed: bool = False
    ) -> tuple[str, dict[str, str]]:
        """The account with a namespace and the worker bound to it; returns the namespace's
        REST URL for values and the account's auth header."""
        base, auth = self.account(account)
        namespace = httpx.post(
            f"{base}/storage/kv/namespaces", json={"title": account}, headers=auth, timeout=60
        ).json()["result"]["id"]
        if seed:
            stored = httpx.put(
                f"{base}/storage/kv/namespaces/{namespace}/values/stored",
                content=b"y" * 100,
                headers=auth,
                timeout=60,
            )
            assert stored.status_code == 200, stored.text
        bindings = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        body, headers = upload(source, bindings=bindings)
        reply = httpx.put(
            f"{base}/workers/scripts/{name}", content=body, headers=headers | auth, timeout=120
        )
        assert reply.status_code == 200, reply.text
        return f"{base}/storage/kv/namespaces/{namespace}/values", auth


async def large_flooder(platform: Platform, index: int, stop: asyncio.Event, size: int) -> int:
    """REST puts of ``size``-byte values to one key, one after the other on one connection,
    until ``stop``; each must be a 200. Returns how many."""
    value = os.urandom(size)
    done = 0
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=1)) as client:
        while not stop.is_set():
            reply = await client.put(
                f"{platform.flood_values}/large{index}", content=value, headers=platform.flood_auth
            )
            assert reply.status_code == 200, reply.text
            done += 1
    return done


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return (
        round(statistics.median(ordered), 2),
        round(ordered[int(0.99 * (len(ordered) - 1))], 2),
    )


async def phase(platform: Platform, kind: str, args: argparse.Namespace) -> dict:
    stop = asyncio.Event()
    flooders = []
    if kind == "flood":
        flooders = [
            asyncio.create_task(
                large_flooder(platform, index, stop, args.value_bytes)
                if args.mode == "large"
                else keepalive_client(platform.port, "writer.flood.localhost", "/flood", stop)
            )
            for index in range(args.flood_connections)
        ]
        await asyncio.sleep(
            0.5 if args.mode == "puts" else 2.0
        )  # the flood is under way before the victim is measured
    gets: list[float] = []
    puts: list[float] = []
    started = time.perf_counter()
    victims = []
    for index in range(args.victim_connections):
        path, into = ("/get", gets) if index % 2 == 0 else ("/put", puts)
        victims.append(
            asyncio.create_task(
                keepalive_client(platform.port, "app.victim.localhost", path, stop, into)
            )
        )
    await asyncio.sleep(args.seconds)
    stop.set()
    await asyncio.gather(*victims)
    elapsed = time.perf_counter() - started
    flooded = sum(await asyncio.gather(*flooders)) if flooders else 0
    writes = flooded if args.mode == "large" else flooded * args.puts
    get_p50, get_p99 = _percentiles(gets)
    put_p50, put_p99 = _percentiles(puts)
    return {
        "side": platform.name,
        "kind": kind,
        "victim_get_p50_ms": get_p50,
        "victim_get_p99_ms": get_p99,
        "victim_put_p50_ms": put_p50,
        "victim_put_p99_ms": put_p99,
        "victim_gets": len(gets),
        "victim_puts": len(puts),
        # Approximate: writes finished over the phase, its lead-in included (large mode:
        # large puts, one a request; else each request's --puts).
        "flood_puts_per_s": round(writes / (elapsed + (0.5 if args.mode == "puts" else 2.0)), 1),
        "loadavg": os.getloadavg()[0],
    }


METRICS = (
    "victim_get_p50_ms",
    "victim_get_p99_ms",
    "victim_put_p50_ms",
    "victim_put_p99_ms",
    "victim_gets",
    "victim_puts",
    "flood_puts_per_s",
)


def main() -> None:
    parser = ab_arguments(__doc__, RESULTS / "kv_flood.json", seconds=8.0)
    parser.add_argument("--victim-connections", type=int, default=2, help="half get, half put")
    parser.add_argument("--flood-connections", type=int, default=4)
    parser.add_argument("--puts", type=int, default=20, help="KV writes per flood request")
    parser.add_argument(
        "--mode",
        choices=("puts", "large"),
        default="puts",
        help="puts: a worker's small KV.puts; large: REST puts of --value-bytes",
    )
    parser.add_argument("--value-bytes", type=int, default=4 * 1024 * 1024)
    args = parser.parse_args()
    if args.mode == "large" and "--out" not in sys.argv:
        args.out = RESULTS / "kv_flood_large.json"
    run_ab("bench.kv_flood", args, Platform, KINDS, METRICS, phase)


if __name__ == "__main__":
    main()
