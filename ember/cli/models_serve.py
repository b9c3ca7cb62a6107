"""``ember models serve MODEL``: the OpenAI-compatible / SGLang-style model server.

Flags are named as ``sglang.launch_server`` names them (``--model-path`` too, beside the
positional MODEL), with vLLM's spellings as aliases and the rest of both servers' launch flags in
``models_serve_compat.py``; torch loads only when the command runs (``--help`` stays light).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ember.cli.models_serve_compat import CompatCommand, compat_options, drop_no_ops
from ember.models.quant_options import INT4_GROUP_SIZES
from ember.models.server.settings import (
    DEFAULT_HEALTH_CHECK_TIMEOUT_S,
    HALF_DTYPES,
    KV_CACHE_DTYPES,
    MODEL_DTYPES,
)
from ember.runtime.connguard import DEFAULT_BODY_MIN_RATE, DEFAULT_BODY_TIMEOUT_S


def _bytes(value: str | None) -> int | None:
    if value is None:
        return None
    from ember.models.server.settings import parse_bytes

    return parse_bytes(value)


def _protocol(body_timeout: int, body_min_rate: str) -> Callable[..., Any]:
    """The runtime's HTTP protocol (``runtime/httphead.py``): its head bound and deadlines,
    the body's from the flags, the rest as ``ember serve``'s defaults."""
    from ember.models.server.settings import parse_bytes
    from ember.runtime.connguard import MODEL_SERVER_NAMES, ConnectionLimits
    from ember.runtime.httphead import model_server_protocol

    limits = ConnectionLimits(
        body_timeout_s=body_timeout,
        body_min_rate=parse_bytes(body_min_rate, "--body-min-rate"),
        names=MODEL_SERVER_NAMES,
    )
    return model_server_protocol(
        limits, lambda line: click.echo(f"ember models serve: {line}", err=True)
    )


@click.command("serve", cls=CompatCommand)
@click.argument("model", required=False)
@click.option(
    "--model-path",
    default=None,
    help="MODEL as sglang.launch_server takes it (give MODEL or --model-path).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=30000, show_default=True, type=int, help="Port (0 picks a free one)."
)
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option(
    "--dtype",
    default="auto",
    show_default=True,
    # The aliases and float16's spellings too: the settings say why float16 is refused.
    type=click.Choice([*MODEL_DTYPES, *HALF_DTYPES]),
    help="Weight and activation dtype: auto (bfloat16), bfloat16 or float32 (float).",
)
@click.option(
    "--kv-cache-dtype",
    default="auto",
    show_default=True,
    type=click.Choice(KV_CACHE_DTYPES),
    help=(
        "KV cache storage (auto: the model's dtype); fp8_e4m3 (3 mantissa bits; vLLM's fp8)"
        " or fp8_e5m2 (2 bits, more range) holds twice the tokens."
    ),
)
@click.option(
    "--quantization",
    default="none",
    show_default=True,
    type=click.Choice(["none", "fp8", "int4"]),
    help="Weight quantization applied at load.",
)
@click.option(
    "--quantization-group-size",
    default=None,
    type=int,  # not a Choice: the settings' refusal says why these sizes
    help=f"INT4 inputs per scale group: {', '.join(map(str, INT4_GROUP_SIZES))} (default 32);"
    " only with --quantization int4.",
)
@click.option(
    "--quantization-targets",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "experts", "all"]),
    help="Which linear layers --quantization covers: experts (routed experts only, as Kimi's"
    " native INT4) or all; auto: all for fp8 (as SGLang and vLLM), experts for int4.",
)
@click.option(
    "--kv-cache-bytes",
    default=None,
    help="KV cache byte budget (e.g. 268435456, 256MiB, 1GiB); wins over --mem-fraction-static.",
)
@click.option(
    "--mem-fraction-static",
    "--gpu-memory-utilization",
    "mem_fraction_static",
    default=None,
    type=float,
    help="Fraction of device memory for weights + KV (SGLang's rule); default on CPU: 256MiB KV.",
)
@click.option(
    "--max-total-tokens", default=None, type=int, help="KV capacity in tokens (debug override)."
)
@click.option(
    "--max-running-requests",
    "--max-num-seqs",
    "max_running_requests",
    default=128,
    show_default=True,
    type=int,
    help="Batch size cap.",
)
@click.option(
    "--chunked-prefill-size",
    "--max-num-batched-tokens",
    "chunked_prefill_size",
    default=1024,
    show_default=True,
    type=int,
    help="Tokens per engine step (prefill chunks + each running request's decode token), so"
    " >= --max-running-requests; -1: no chunking (a whole prompt per step, as SGLang).",
)
@click.option(
    "--page-size",
    "--block-size",
    "page_size",
    default=16,
    show_default=True,
    type=int,
    help="Tokens per KV page.",
)
@click.option(
    "--context-length",
    "--max-model-len",
    "context_length",
    default=None,
    type=int,
    help="Cap on prompt + output tokens.",
)
@click.option(
    "--integrity",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "off", "sampled", "full"]),
    help="KV-cache integrity checks during decode (auto: sampled on CPU, off on CUDA).",
)
@click.option(
    "--disable-radix-cache",
    "--no-enable-prefix-caching",
    "disable_radix_cache",
    is_flag=True,
    help="Turn the prefix cache off.",
)
@click.option("--served-model-name", default=None, help="Model name in the API (default: MODEL).")
@click.option(
    "--tool-call-parser",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "kimi_k2", "glm", "glm45", "glm47"]),
    help="Tool-call syntax (auto: the model family's; another family's is refused).",
)
@click.option("--api-key", default=None, help="Require 'Authorization: Bearer KEY'.")
@click.option(
    "--body-timeout",
    default=DEFAULT_BODY_TIMEOUT_S,  # ember serve's server.body_timeout
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds a request body may take after its head, plus 1 s per --body-min-rate bytes"
    " received (as ember serve's server.body_timeout); past it: 408 and close.",
)
@click.option(
    "--body-min-rate",
    default=f"{DEFAULT_BODY_MIN_RATE // 1024}KiB",  # ember serve's server.body_min_rate
    show_default=True,
    help="Bytes that earn a body one more second (as ember serve's server.body_min_rate).",
)
@click.option("--torch-threads", default=None, type=int, help="torch intra-op threads.")
@click.option(
    "--health-check-timeout",
    default=DEFAULT_HEALTH_CHECK_TIMEOUT_S,
    show_default=True,
    type=float,
    help="Seconds with requests waiting or running and no engine step finished, after which"
    " /health answers 503 naming the stall, so a pool replaces the server (as SGLang's"
    " SGLANG_HEALTH_CHECK_TIMEOUT bounds /health_generate).",
)
@compat_options
def serve(model: str | None, model_path: str | None, **flags: object) -> None:
    """Serve MODEL (a catalog id such as @cf/moonshotai/kimi-k2.5, or a checkpoint directory)
    over OpenAI-compatible /v1/chat/completions, /v1/completions, /v1/responses, /v1/models
    and SGLang's /generate, with /health and /metrics."""
    from ember.models.server.settings import ServerSettings

    if (model is None) == (model_path is None):
        raise click.UsageError(
            "give the model once: as MODEL or as --model-path"
            + (" (both were given)" if model else "")
        )
    model = model or model_path
    drop_no_ops(flags)

    flags["kv_cache_bytes"] = _bytes(flags["kv_cache_bytes"])  # type: ignore[arg-type]
    http = _protocol(flags.pop("body_timeout"), flags.pop("body_min_rate"))  # type: ignore[arg-type]
    settings = ServerSettings(model=model, **flags)  # type: ignore[arg-type]
    from ember.models.server.source_check import unknown_model

    unknown = unknown_model(settings.model)
    if unknown is not None:
        raise unknown
    # Only now torch and the engine (~2 CPU-seconds): a usage, settings or MODEL error answers
    # before (a pool retrying a replica whose checkpoint is gone pays this on every try).
    from ember.models.server.runner import run_server

    status = run_server(settings, http=http)
    if status:
        raise SystemExit(status)
