"""An oversized prompt next to a running stream: how long its 400 takes, and what it costs the
stream.

    PYTHONPATH=. python -m bench.oversized_prompt [--rounds 3] [--mib 2] [--concurrent 1]

One model server (``ember models serve`` glm4moe-tiny, a subprocess, one torch thread) and one
``ember dev`` (a subprocess) whose worker passes its JSON body to ``env.AI.run`` (the AI binding
attached to that server by URL, as ``bench/ai.py`` does). Per round and path (straight to the
server's ``/v1/chat/completions``, or through the worker): a chat stream starts (``ignore_eos``,
long enough to outlast the rest), and once it has sent a few chunks, ``--concurrent`` requests
whose one user message is ``--mib`` MiB of Python source go out at once. Measured: each big
request's time to its answer (a 400: the prompt cannot fit the 4096-token window), and the
stream's longest gap between chunks from the first send to the last answer, beside its median
gap before (one decode step, about).

Before the byte bound (``ember/models/server/prompt_intake.py``) the server tokenized the whole
prompt on its event loop first (~2-3 s for 2 MiB here) and every stream it was sending stalled
for as long. Writes ``bench/results/oversized_prompt.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai import MODEL, SERVER_ARGS, _env, _start_dev, _stop, _wait_http, checkpoint  # noqa: E402
from bench.ai_load import load_average  # noqa: E402
from ember.models.pool.launch import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results"
# Errors come back as the worker's 400 with their text, so the bench sees what a handler sees.
WORKER = """
from workers import Response

async def on_fetch(request, env):
    body = await request.json()
    try:
        answer = await env.AI.run("@cf/zai-org/glm-4.7-flash", body)
    except Exception as error:
        return Response(str(error), status=400)
    if body.get("stream"):
        return Response(answer, headers={"content-type": "text/event-stream"})
    return Response.json(answer)
"""


def big_text(mib: float) -> str:
    """``mib`` MiB of Python source (the standard library's, as the checkpoints were trained
    on): ordinary text for this tokenizer, not a repetition its cache would shortcut."""
    import argparse as source_module

    source = Path(source_module.__file__).read_text(encoding="utf-8")
    size = int(mib * 2**20)
    return (source * (size // len(source) + 1))[:size]


def stream_body(max_tokens: int) -> dict:
    return {
        "messages": [{"role": "user", "content": "Write a long Python module."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }


class Stream(threading.Thread):
    """One streamed chat request; records when each SSE chunk arrived."""

    def __init__(self, url: str, body: dict) -> None:
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.arrivals: list[float] = []
        self.error: str | None = None

    def run(self) -> None:
        try:
            with httpx.stream("POST", self.url, json=self.body, timeout=600) as response:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        self.arrivals.append(time.perf_counter())
        except httpx.HTTPError as error:
            self.error = repr(error)


def one_round(url: str, payload: bytes, concurrent: int, max_tokens: int, model: str) -> dict:
    body = {**stream_body(max_tokens), **({"model": model} if model else {})}
    stream = Stream(url, body)
    stream.start()
    while len(stream.arrivals) < 8 and stream.is_alive():
        time.sleep(0.01)
    answers: list[tuple[float, int, str]] = []

    def big() -> None:
        started = time.perf_counter()
        response = httpx.post(
            url, content=payload, headers={"content-type": "application/json"}, timeout=600
        )
        answers.append((time.perf_counter() - started, response.status_code, response.text))

    sent = time.perf_counter()
    senders = [threading.Thread(target=big) for _ in range(concurrent)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    done = time.perf_counter()
    stream.join()
    arrivals = stream.arrivals
    before = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False) if b < sent]
    # Gaps that overlap [sent, done]: from the last chunk before the send on.
    window = [t for t in arrivals if sent <= t <= done]
    last_before = max((t for t in arrivals if t < sent), default=sent)
    first_after = min((t for t in arrivals if t > done), default=done)
    edges = [last_before, *window, first_after]
    gaps = [b - a for a, b in zip(edges, edges[1:], strict=False)]
    return {
        "time_to_answer_s": [round(a[0], 4) for a in answers],
        "status": sorted({a[1] for a in answers}),
        "answer": answers[0][2][:300] if answers else "",
        "stream_chunks_during": len(window),
        "stream_longest_gap_during_s": round(max(gaps), 4),
        "stream_median_gap_before_s": round(statistics.median(before), 4) if before else None,
        "stream_error": stream.error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=1500)
    parser.add_argument("--out", type=Path, default=RESULTS / "oversized_prompt.json")
    args = parser.parse_args()
    text = big_text(args.mib)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        server_port, dev_port = free_port(), free_port()
        import subprocess

        server = subprocess.Popen(
            [sys.executable, "-m", "ember", "models", "serve", str(checkpoint(work))]
            + ["--port", str(server_port), "--served-model-name", MODEL, *SERVER_ARGS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=_env(),
        )
        project = work / "oversized"
        project.mkdir()
        (project / "worker.py").write_text(WORKER)
        (project / "ember.yaml").write_text(
            "name: oversized\nmain: worker.py\nlimits:\n  cpu_ms: 300000\nai:\n  binding: AI\n"
            f'  models:\n    "{MODEL}":\n      url: http://127.0.0.1:{server_port}\n'
        )
        dev = _start_dev(project, dev_port)
        direct = f"http://127.0.0.1:{server_port}/v1/chat/completions"
        runtime = f"http://127.0.0.1:{dev_port}/"
        rows = []
        try:
            _wait_http(f"http://127.0.0.1:{server_port}/health")
            warm = {**stream_body(4), "stream": False}
            _wait_http_post(runtime, warm)
            messages = [{"role": "user", "content": text}]
            paths = {
                "direct": (direct, {"model": MODEL, "messages": messages}, MODEL),
                "ember_dev": (runtime, {"messages": messages}, ""),
            }
            for round_index in range(args.rounds):
                for path, (url, big, model) in paths.items():
                    payload = json.dumps(big).encode()
                    row = one_round(url, payload, args.concurrent, args.max_tokens, model)
                    row = {"path": path, "round": round_index, **row}
                    rows.append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "answer"}), flush=True)
        finally:
            _stop(dev)
            _stop(server)
    result = {
        "mib": args.mib,
        "body_bytes": len(json.dumps({"messages": [{"role": "user", "content": text}]})),
        "concurrent": args.concurrent,
        "load_average": load_average(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(rows[-1]["answer"] if rows else "")


def _wait_http_post(url: str, body: dict, timeout: float = 300) -> None:
    """Until the worker answers (the first call starts its isolate and the AI binding)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.post(url, json=body, timeout=120).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer 200 in {timeout} s")


if __name__ == "__main__":
    main()
