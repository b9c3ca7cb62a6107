"""The longest engine step the shipped models take on this CPU: what ``--health-check-timeout``
must stay well above, so that a legitimate step never reads as a stalled engine.

    PYTHONPATH=. python -m bench.longest_step [--threads 1] [--chunks 1024,4095]

The longest step is a prefill of the largest chunk: a prompt filling the context window
(4096 tokens for every shipped checkpoint) with ``--chunked-prefill-size`` as large as that
prompt, so the whole prompt is one step (no chunk is larger). For each shipped model and chunk
size it loads the model as ``ember models serve`` does (default flags, ``--torch-threads``),
times every ``LLMEngine.step()`` of one such prompt (and of a 64-request decode batch after
it), and keeps the longest. The machine's load average is recorded: a shared box's steps are
slower, which is the case the bound must survive. Writes ``bench/results/longest_step.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ember.models.engine.sequence import StopCriteria
from ember.models.server.loading import load_served_model
from ember.models.server.settings import ServerSettings

MODELS = ("@cf/zai-org/glm-4.7-flash", "@cf/moonshotai/kimi-k2.5", "@cf/zai-org/glm-5.2")
OUT = Path(__file__).parent / "results" / "longest_step.json"


def _steps(llm, prompts: list[list[int]], max_tokens: int) -> list[float]:  # noqa: ANN001
    for number, prompt in enumerate(prompts):
        llm.add_request(f"r{number}", prompt, StopCriteria(max_tokens=max_tokens, ignore_eos=True))
    times = []
    while llm.has_unfinished():
        started = time.perf_counter()
        llm.step()
        times.append(time.perf_counter() - started)
    return times


def measure(model: str, chunk: int, threads: int) -> dict:
    settings = ServerSettings(model=model, chunked_prefill_size=chunk, torch_threads=threads)
    served = load_served_model(settings, lambda line: None)
    try:
        served.engine.shutdown()  # the engine thread is idle; steps are driven here
        llm = served.llm
        length = served.context_length - 1  # the longest prompt the engine takes
        prompt = [(7 * i) % 4000 + 10 for i in range(length)]
        prefill = _steps(llm, [prompt], 1)
        batch = _steps(llm, [[(i * 13 + j) % 4000 + 10 for j in range(32)] for i in range(64)], 16)
        return {
            "model": model,
            "chunked_prefill_size": chunk,
            "prompt_tokens": length,
            "prefill_steps": len(prefill),
            "longest_prefill_step_s": round(max(prefill), 3),
            "longest_batch64_step_s": round(max(batch), 3),
            "load_average_1m": os.getloadavg()[0],
        }
    finally:
        served.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chunks", default="1024,4095")
    args = parser.parse_args()
    rows = []
    for model in MODELS:
        for chunk in (int(c) for c in args.chunks.split(",")):
            row = measure(model, chunk, args.threads)
            print(json.dumps(row), flush=True)
            rows.append(row)
    result = {
        "cpu_count": os.cpu_count(),
        "torch_threads": args.threads,
        "rows": rows,
        "longest_step_s": max(r["longest_prefill_step_s"] for r in rows),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"longest_step_s": result["longest_step_s"]}))


if __name__ == "__main__":
    main()
