"""The baseline a user would otherwise run: HF transformers ``generate()`` behind a simple HTTP
server speaking the same ``/v1/completions`` subset as ember's model server (token-id prompts,
``max_tokens``, ``ignore_eos``, greedy, SSE streaming with usage), so the serving benchmark
drives both with the same client.

Two modes, the two ways the issue names:

- ``naive``: one ``generate()`` per request, one at a time (a lock), as a simple server does;
- ``static``: requests are gathered into static batches of up to ``--batch-size`` (waiting at
  most ``--batch-wait`` seconds after the first one arrives), left-padded, and run as one
  ``generate()``; every request of a batch streams its own tokens. This is HF at its best for a
  closed loop of ``--batch-size`` clients: all of them arrive together after each batch.

Either way the generation runs in a worker thread and each step's tokens reach the event loop
through a streamer, detokenized and sent as OpenAI ``text_completion`` chunks (the per-token
work a server does).

    PYTHONPATH=. python -m bench.hf_server CHECKPOINT_DIR --port 31000 --mode static
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import torch
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from transformers import AutoModelForCausalLM
from transformers.generation.streamers import BaseStreamer

from ember.models.tokenizer import Tokenizer


@dataclass
class _Job:
    prompt: list[int]
    max_tokens: int
    ignore_eos: bool
    loop: asyncio.AbstractEventLoop
    tokens: asyncio.Queue = field(default_factory=asyncio.Queue)  # int lists, then None


class _BatchStreamer(BaseStreamer):
    """Hands each step's (B,) new tokens to the jobs of the batch (the first put is the prompt)."""

    def __init__(self, jobs: list[_Job]) -> None:
        self.jobs = jobs
        self.seen_prompt = False
        self.done = [False] * len(jobs)
        self.count = [0] * len(jobs)

    def put(self, value: torch.Tensor) -> None:
        if not self.seen_prompt:
            self.seen_prompt = True
            return
        for row, token in enumerate(value.reshape(len(self.jobs), -1)[:, -1].tolist()):
            job = self.jobs[row]
            if self.done[row]:
                continue
            self.count[row] += 1
            if self.count[row] >= job.max_tokens:
                self.done[row] = True
            job.loop.call_soon_threadsafe(job.tokens.put_nowait, [token])

    def end(self) -> None:
        for job in self.jobs:
            job.loop.call_soon_threadsafe(job.tokens.put_nowait, None)


class HFBaseline:
    def __init__(self, directory: str, dtype: torch.dtype, mode: str, batch_size: int, wait: float):
        self.model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype).eval()
        self.tokenizer = Tokenizer.from_dir(directory)
        self.pad_id = self.model.config.pad_token_id or 0
        self.mode = mode
        self.batch_size = batch_size
        self.wait = wait
        self.lock = threading.Lock()
        self.pending: asyncio.Queue[_Job] | None = None

    def _generate(self, jobs: list[_Job]) -> None:
        width = max(len(j.prompt) for j in jobs)
        ids = torch.full((len(jobs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(jobs), width), dtype=torch.long)
        for row, job in enumerate(jobs):  # left padding
            ids[row, width - len(job.prompt) :] = torch.tensor(job.prompt)
            mask[row, width - len(job.prompt) :] = 1
        new = max(j.max_tokens for j in jobs)
        ignore_eos = all(j.ignore_eos for j in jobs)
        with self.lock, torch.inference_mode():
            self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=new,
                min_new_tokens=new if ignore_eos else None,
                pad_token_id=self.pad_id,
                streamer=_BatchStreamer(jobs),
            )

    async def submit(self, job: _Job) -> None:
        if self.mode == "naive":
            await asyncio.to_thread(self._run_safely, [job])
        else:
            assert self.pending is not None
            await self.pending.put(job)

    def _run_safely(self, jobs: list[_Job]) -> None:
        try:
            self._generate(jobs)
        except Exception:  # a failed batch must not leave its clients waiting
            for job in jobs:
                job.loop.call_soon_threadsafe(job.tokens.put_nowait, None)
            raise

    async def batcher(self) -> None:
        """Static batching: gather up to batch_size jobs, run them together, repeat."""
        assert self.pending is not None
        while True:
            jobs = [await self.pending.get()]
            deadline = time.monotonic() + self.wait
            while len(jobs) < self.batch_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    jobs.append(await asyncio.wait_for(self.pending.get(), remaining))
                except TimeoutError:
                    break
            await asyncio.to_thread(self._run_safely, jobs)


def _chunk(rid: str, text: str, finish: str | None = None) -> bytes:
    body = {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": "hf",
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def build_app(baseline: HFBaseline) -> Starlette:
    counter = iter(range(1 << 62))

    async def completions(request: Request) -> Response:
        body = await request.json()
        prompt = body["prompt"]
        if isinstance(prompt, str):
            prompt = baseline.tokenizer.encode(prompt)
        job = _Job(
            list(prompt),
            int(body.get("max_tokens", 16)),
            bool(body.get("ignore_eos", False)),
            asyncio.get_running_loop(),
        )
        rid = f"cmpl-{next(counter)}"
        runner = asyncio.ensure_future(baseline.submit(job))
        decoder = baseline.tokenizer.incremental_decoder()
        eos = set(baseline.model.generation_config.eos_token_id or [])

        async def tokens():
            count = 0
            while True:
                item = await job.tokens.get()
                if item is None:
                    return
                for token in item:
                    count += 1
                    yield token, count

        if not body.get("stream"):
            out = []
            async for token, _ in tokens():
                out.append(token)
            await runner
            usage = {"prompt_tokens": len(job.prompt), "completion_tokens": len(out)}
            text = baseline.tokenizer.decode(out)
            return JSONResponse(
                {
                    "id": rid,
                    "object": "text_completion",
                    "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                    "usage": usage | {"total_tokens": len(job.prompt) + len(out)},
                }
            )

        async def stream():
            count = 0
            async for token, seen in tokens():
                count = seen
                text = "" if token in eos and not job.ignore_eos else decoder.push([token])
                yield _chunk(rid, text)
            yield _chunk(rid, decoder.finish(), "length")
            usage = {
                "prompt_tokens": len(job.prompt),
                "completion_tokens": count,
                "total_tokens": len(job.prompt) + count,
            }
            final = {"id": rid, "object": "text_completion", "choices": [], "usage": usage}
            yield b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
            await runner

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        batcher = None
        if baseline.mode == "static":
            baseline.pending = asyncio.Queue()
            batcher = asyncio.ensure_future(baseline.batcher())
        yield
        if batcher is not None:
            batcher.cancel()

    return Starlette(
        routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--port", type=int, default=31000)
    parser.add_argument("--mode", choices=["naive", "static"], default="naive")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batch-wait", type=float, default=0.25)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    baseline = HFBaseline(args.checkpoint, dtype, args.mode, args.batch_size, args.batch_wait)
    uvicorn.run(build_app(baseline), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
