"""How long a static asset upload holds ``ember serve``'s event loop: while one 40 MiB bucket
(wrangler's largest, sent base64 in a ~54 MiB form) is uploaded, a tiny request (another
tenant's ``GET /client/v4/accounts/ID/workers/scripts``) is sent again and again; its worst
latency is the stall every tenant sees. A real ``ember serve`` subprocess on loopback.

    python -m bench.asset_upload_stall [--out bench/results/asset_upload_stall.json] [--rounds 3]

Run with ``PYTHONPATH`` at another checkout to measure that one (before/after a change).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from ember.runtime.deployments.multipart import Part, build_multipart
from tests.serve.conftest import ServeProcess, permanent_account

FILES, FILE_BYTES = 8, 5 * 1024 * 1024  # 40 MiB: one bucket (BUCKET_BYTES)


def one_round(serve: ServeProcess, round_no: int) -> dict[str, float]:
    account_id, token = permanent_account(serve, f"uploader{round_no}")
    other_id, other_token = permanent_account(serve, f"other{round_no}")
    files = {f"{round_no:02x}{i:030x}": os.urandom(FILE_BYTES) for i in range(FILES)}
    manifest = {f"/f{i}.bin": {"hash": h, "size": FILE_BYTES} for i, h in enumerate(files)}
    with serve.api(token) as api:
        path = f"/accounts/{account_id}/workers/scripts/w/assets-upload-session"
        jwt = api.post(path, json={"manifest": manifest}).json()["result"]["jwt"]
    # Encoded here, before the probe starts: the uploading thread only sends bytes, so this
    # process's own GIL does not add to the latency it measures.
    parts = [Part(h, h, "application/octet-stream", base64.b64encode(c)) for h, c in files.items()]
    boundary = "----ember-asset-stall"
    body = build_multipart(parts, boundary)
    content_type = f"multipart/form-data; boundary={boundary}"
    done = threading.Event()
    result: dict[str, object] = {}

    def upload() -> None:
        with httpx.Client(base_url=serve.url + "/client/v4", timeout=300) as client:
            start = time.perf_counter()
            reply = client.post(
                f"/accounts/{account_id}/workers/assets/upload?base64=true",
                content=body,
                headers={"authorization": f"Bearer {jwt}", "content-type": content_type},
            )
            result["upload_s"] = time.perf_counter() - start
            result["status"] = reply.status_code
        done.set()

    latencies: list[float] = []
    with serve.api(other_token) as other:
        other.get(f"/accounts/{other_id}/workers/scripts")  # warm the connection
        thread = threading.Thread(target=upload)
        thread.start()
        while not done.is_set():
            start = time.perf_counter()
            other.get(f"/accounts/{other_id}/workers/scripts")
            latencies.append(time.perf_counter() - start)
            time.sleep(0.005)
        thread.join()
        idle: list[float] = []  # the same number of probes with no upload: the noise floor
        for _ in latencies:
            start = time.perf_counter()
            other.get(f"/accounts/{other_id}/workers/scripts")
            idle.append(time.perf_counter() - start)
            time.sleep(0.005)
    assert result["status"] == 201, result
    return {
        "idle_max_ms": max(idle) * 1000,
        "upload_s": float(result["upload_s"]),  # type: ignore[arg-type]
        "probe_max_ms": max(latencies) * 1000,
        "probe_p50_ms": statistics.median(latencies) * 1000,
        "probes": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        serve = ServeProcess(Path(tmp) / "state")
        try:
            rounds = [one_round(serve, n) for n in range(args.rounds)]
        finally:
            serve.stop()
    summary = {
        key: statistics.median(r[key] for r in rounds)
        for key in ("probe_max_ms", "idle_max_ms", "probe_p50_ms", "upload_s")
    }
    report = {
        "label": args.label,
        "bucket_bytes": FILES * FILE_BYTES,
        "median": summary,
        "rounds": rounds,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
