"""GPU check of the AI path: the embedded engine on CUDA through the model pool (BF16 and FP8
KV, INT4 weights), and a real SGLang replica wherever SGLang is installed.

    python3 scripts/gpu_check.py [--device cuda:0] [--out DIR]     (scripts/gpu-check.sh wraps it)

For each serving configuration the pool launches one replica, waits for it, and checks through
``AIGateway`` (the code behind ``env.AI.run``): a chat completion, a stream in the platform's
format, a forced tool call with JSON-string arguments that parse, a JSON-schema answer that
validates, then streams at 1, 16 and 64 concurrent requests (tokens/s, TTFT). Results go to
``OUT/gpu-check.json`` (``$OUT`` if set). Runs in a few minutes on the tiny checkpoints (the
shipped ones when built, else random-init stand-ins of the same configs). ``--device cpu`` runs
the same checks here, to test the script itself.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GLM = "@cf/zai-org/glm-4.7-flash"
SCHEMA = {
    "type": "object",
    "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
    "required": ["unit", "days"],
    "additionalProperties": False,
}
TOOL = {"type": "function", "function": {"name": "forecast", "parameters": SCHEMA}}
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


def checkpoint(name: str, scratch: Path) -> Path:
    """The shipped checkpoint if built, else random-init weights with its config and tokenizer."""
    import torch

    from ember.models.arch import build_model
    from ember.models.catalog import SHIPPED_CHECKPOINTS
    from ember.models.config_parse import parse_config
    from ember.models.loader import save_checkpoint
    from ember.models.training.pipeline import specs

    shipped = SHIPPED_CHECKPOINTS / name
    if (shipped / "config.json").is_file():
        return shipped
    out = scratch / name
    out.mkdir(parents=True, exist_ok=True)
    config = parse_config(specs()[name].hf_config, source=f"{name} (random init)")
    torch.manual_seed(0)
    save_checkpoint(build_model(config), out, dtype=torch.bfloat16)
    source = SHIPPED_CHECKPOINTS / ("kimi-tiny" if name == "kimi-tiny" else "glm4moe-tiny")
    for file in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(source / file, out / file)
    return out


def _matches(value: dict) -> bool:
    return value.get("unit") in ("celsius", "fahrenheit") and isinstance(value.get("days"), int)


async def check_replica(
    name: str, serving: dict, lines: list[str], stream_tokens: int = 64
) -> dict:
    """Launch one replica with ``serving`` (an ai.models entry) and run every check;
    ``stream_tokens``: the length of each stream in the throughput phases."""
    from bench.ai_load import RequestTiming, percentile
    from ember.bindings.ai.gateway import AIGateway, GatewayConfig
    from ember.bindings.ai.options import RunOptions
    from ember.bindings.ai.tenant import Tenant
    from ember.models.api.sse import parse_sse
    from ember.models.pool.config import parse_pool_config

    tenant = Tenant.alone("gpu")

    pool = parse_pool_config({GLM: serving}, {"startup_timeout_s": 600})
    gateway = AIGateway(GatewayConfig(pool, project_config=False), progress=lines.append)
    result: dict = {"name": name, "serving": serving}
    started = time.perf_counter()
    try:
        if not await gateway.pool.wait_ready(GLM, 600):
            replica = gateway.pool.group(GLM).replicas[0]
            result["error"] = f"not ready: {replica.last_error}"
            return result
        replica = gateway.pool.group(GLM).replicas[0]
        result["ready_s"] = round(time.perf_counter() - started, 2)
        result["command"] = replica.last_command.shell() if replica.last_command else None
        import httpx

        async with httpx.AsyncClient(timeout=30) as client:
            info = await client.get(f"{replica.url}/get_model_info")
            result["model_info"] = info.json() if info.status_code == 200 else info.status_code
        options = RunOptions()
        whole = (
            await gateway.run(tenant, GLM, {"prompt": "Hello", "max_tokens": 16}, options)
        ).json()
        result["chat"] = {"usage": whole["usage"], "finish": whole["choices"][0]["finish_reason"]}
        answer = await gateway.run(
            tenant, GLM, {"prompt": "Hi", "max_tokens": 8, "stream": True}, options
        )
        events = parse_sse(b"".join([c async for c in answer.stream]))
        result["stream_ok"] = events[-1] == "[DONE]" and "usage" in events[-2]
        tool_inputs = {
            "messages": [{"role": "user", "content": "Forecast?"}],
            "tools": [TOOL],
            "tool_choice": {"type": "function", "function": {"name": "forecast"}},
            "max_tokens": 200,
            **NO_THINKING,
        }
        called = (await gateway.run(tenant, GLM, tool_inputs, options)).json()
        arguments = called["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        result["tool_call_ok"] = isinstance(arguments, str) and _matches(json.loads(arguments))
        schema_inputs = {
            "messages": [{"role": "user", "content": "Forecast as JSON."}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "f", "schema": SCHEMA},
            },
            "max_tokens": 200,
            **NO_THINKING,
        }
        shaped = (await gateway.run(tenant, GLM, schema_inputs, options)).json()
        result["json_schema_ok"] = _matches(json.loads(shaped["choices"][0]["message"]["content"]))
        result["throughput"] = []
        body = {
            "prompt": "Write code.",
            "max_tokens": stream_tokens,
            "ignore_eos": True,
            "stream": True,
        }
        for concurrency in (1, 16, 64):
            timings: list[RequestTiming] = []

            async def one(timings: list[RequestTiming] = timings) -> None:
                began = time.perf_counter()
                first, tokens = 0.0, 0
                streamed = await gateway.run(tenant, GLM, body, options)
                async for chunk in streamed.stream:
                    for event in parse_sse(chunk):
                        delta = (
                            (event.get("choices") or [{}])[0].get("delta", {})
                            if isinstance(event, dict)
                            else {}
                        )
                        if not first and (delta.get("content") or delta.get("reasoning_content")):
                            first = time.perf_counter() - began
                        if isinstance(event, dict) and isinstance(event.get("usage"), dict):
                            tokens = event["usage"]["completion_tokens"]
                timings.append(RequestTiming(first, time.perf_counter() - began, tokens))

            slots = asyncio.Semaphore(concurrency)  # at most ``concurrency`` streams at once

            async def limited(slots: asyncio.Semaphore = slots) -> None:
                async with slots:
                    await one()

            wall = time.perf_counter()
            await asyncio.gather(*(limited() for _ in range(max(concurrency, 8))))
            wall = time.perf_counter() - wall
            ttfts = sorted(t.ttft for t in timings)
            result["throughput"].append(
                {
                    "concurrency": concurrency,
                    "requests": len(timings),
                    "tokens_per_s": round(sum(t.tokens for t in timings) / wall, 1),
                    "ttft_p50_ms": round(percentile(ttfts, 0.5) * 1000, 2),
                }
            )
    except Exception as exc:  # one configuration's failure is recorded, the others still run
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-2000:]
    finally:
        await gateway.aclose()
        result["log_tail"] = lines[-12:]
    return result


def environment() -> dict:
    info: dict = {"python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        info["torch"] = None
    info["sglang"] = importlib.util.find_spec("sglang") is not None
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        info["nvidia_smi"] = smi.stdout.strip()
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    )
    parser.add_argument(
        "--stream-tokens",
        type=int,
        default=64,
        help="tokens per stream in the 1/16/64-stream phases (the test of this script uses few)",
    )
    args = parser.parse_args()
    report: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "env": environment(),
    }
    missing = [
        m for m in ("starlette", "uvicorn", "httpx", "torch") if importlib.util.find_spec(m) is None
    ]
    report["missing_packages"] = missing
    if not missing:
        with tempfile.TemporaryDirectory() as scratch:
            ckpt = str(checkpoint("glm4moe-tiny", Path(scratch)))
            # A tiny model needs no 120 GiB KV pool: a fixed budget keeps start-up short.
            small = ["--kv-cache-bytes", "512MiB" if args.device == "cpu" else "2GiB"]
            if args.device == "cpu":
                small += ["--torch-threads", "1"]  # a shared CPU box: intra-op threads fight
            configs = [
                ("ember bf16 KV", {"device": args.device, "kv_cache_dtype": "bf16"}),
                (
                    "ember fp8 KV + int4",
                    {"device": args.device, "kv_cache_dtype": "fp8_e4m3", "quantization": "int4"},
                ),
            ]
            if report["env"]["sglang"] and args.device != "cpu":
                configs.append(
                    (
                        "sglang fp8 KV",
                        {"backend": "sglang", "device": args.device, "kv_cache_dtype": "fp8_e4m3"},
                    )
                )
            report["results"] = []
            for name, serving in configs:
                serving = {
                    "checkpoint": ckpt,
                    "args": small if serving.get("backend") != "sglang" else [],
                    **serving,
                }
                print(f"== {name}", flush=True)
                outcome = asyncio.run(check_replica(name, serving, [], args.stream_tokens))
                print(
                    json.dumps(
                        {k: v for k, v in outcome.items() if k not in ("traceback", "log_tail")}
                    ),
                    flush=True,
                )
                report["results"].append(outcome)
            if not report["env"]["sglang"]:
                report["sglang"] = "not installed here: no SGLang replica was run"
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "gpu-check.json"
    target.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {target}")
    failed = [r["name"] for r in report.get("results", []) if "error" in r]
    sys.exit(1 if missing or failed else 0)


if __name__ == "__main__":
    main()
