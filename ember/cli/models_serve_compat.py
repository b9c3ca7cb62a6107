"""The launch flags of ``sglang.launch_server`` and ``vllm serve`` that ``ember models serve``
takes besides its own, so that a command copied from their docs starts instead of stopping at
"No such option".

Three kinds (docs/model-server.md lists them):
- honoured: ``--random-seed`` (vLLM: ``--seed``), ``--sampling-defaults model|openai``
  (vLLM: ``--generation-config auto|vllm``), vLLM's ``--logprobs-mode`` (``raw_logprobs`` or
  ``processed_logprobs``), ``--log-level``, ``--log-requests`` (vLLM:
  ``--enable-log-requests``), ``--decode-log-interval``, ``--max-prefill-tokens``,
  ``--chat-template``, ``--tokenizer-path``; vLLM's spellings of ember's own flags are aliases
  where they are declared (``--max-model-len``, ``--max-num-seqs``...);
- accepted and meaningless on ember's engine: ``--tp 1``, ``--dp 1``, ``--disable-cuda-graph``
  (vLLM: ``--enforce-eager``), ``--attention-backend``, ``--grammar-backend``,
  ``--enable-auto-tool-choice``, ``--disable-log-requests``, ``--schedule-policy fcfs``;
  ``--reasoning-parser`` naming the model's own format;
- refused, naming the flag: a value ember cannot honour (``--tp 2``, a parser that is not the
  model's, a schedule policy other than first come first served).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

F = Callable[..., Any]
# vLLM's --generation-config values as SGLang's --sampling-defaults ones.
_SAMPLING_SOURCES = {"auto": "model", "vllm": "openai"}
# Flags that change nothing here: popped before the settings are built.
NO_OPS = (
    "enable_prefix_caching",
    "disable_cuda_graph",
    "attention_backend",
    "grammar_backend",
    "enable_auto_tool_choice",
    "disable_log_requests",
    "schedule_policy",
    "enable_metrics",
    "trust_remote_code",
)

_OPTIONS: list[Callable[[F], F]] = [
    click.option(
        "--tp-size",
        "--tp",
        "--tensor-parallel-size",
        "tp_size",
        default=1,
        show_default=True,
        type=int,
        help="SGLang's / vLLM's tensor parallelism: 1 (one device per server).",
    ),
    click.option(
        "--dp-size",
        "--dp",
        "--data-parallel-size",
        "dp_size",
        default=1,
        show_default=True,
        type=int,
        help="Data parallelism: 1 (run more servers behind the pool for more).",
    ),
    click.option(
        "--random-seed",
        "--seed",
        "random_seed",
        default=None,
        type=int,
        help="Seed the requests that bring no seed: sampling is reproducible from start.",
    ),
    click.option(
        "--sampling-defaults",
        "--generation-config",
        "sampling_defaults",
        default="model",
        show_default=True,
        type=click.Choice(["model", "openai", "auto", "vllm"]),
        callback=lambda _ctx, _param, value: _SAMPLING_SOURCES.get(value, value),
        help="Defaults for the sampling fields a request leaves out: model (SGLang's name; "
        "vLLM's auto) takes temperature, top_p, top_k, min_p, repetition_penalty and "
        "max_new_tokens from generation_config.json; openai (vLLM's vllm) does not.",
    ),
    click.option(
        "--logprobs-mode",
        default="raw_logprobs",
        show_default=True,
        type=click.Choice(["raw_logprobs", "processed_logprobs"]),
        help="vLLM's: the OpenAI routes' logprobs of the model's raw distribution, or of the one "
        "sampled from (after bias, penalties, temperature and the top-k/top-p/min-p cut).",
    ),
    click.option(
        "--log-level",
        default="info",
        show_default=True,
        type=click.Choice(["debug", "info", "warning", "error", "critical"]),
        help="Request-time log lines at or above this level (startup lines always print).",
    ),
    click.option(
        "--log-requests",
        "--enable-log-requests",
        "log_requests",
        is_flag=True,
        help="Log one line per finished request (id, outcome, token counts, latency).",
    ),
    click.option(
        "--decode-log-interval",
        default=40,
        show_default=True,
        type=int,
        help="Log SGLang's 'Decode batch.' stats line every N decode steps (0: never).",
    ),
    click.option(
        "--disable-log-stats",
        "decode_log_interval",
        flag_value=0,
        type=int,
        help="vLLM's: no periodic stats line (as --decode-log-interval 0).",
    ),
    click.option(
        "--max-prefill-tokens",
        default=None,
        type=int,
        help="SGLang's prefill budget: caps the tokens per engine step (with the chunk size).",
    ),
    click.option(
        "--chat-template",
        default=None,
        type=click.Path(exists=True, dir_okay=False),
        help="A Jinja chat template file replacing the checkpoint's.",
    ),
    click.option(
        "--tokenizer-path",
        "--tokenizer",
        "tokenizer_path",
        default=None,
        type=click.Path(exists=True, file_okay=False),
        help="A directory with tokenizer.json to use instead of MODEL's.",
    ),
    click.option(
        "--reasoning-parser",
        default=None,
        type=click.Choice(["glm45", "glm47", "kimi", "kimi_k2"]),
        help="Accepted when it names the model's own reasoning format (parsed always).",
    ),
    click.option(
        "--schedule-policy",
        default="fcfs",
        show_default=True,
        type=click.Choice(["fcfs"]),
        help="ember schedules first come, first served.",
    ),
    click.option(
        "--disable-cuda-graph",
        "--enforce-eager",
        "disable_cuda_graph",
        is_flag=True,
        help="Accepted: ember captures no CUDA graphs.",
    ),
    click.option(
        "--attention-backend", default=None, help="Accepted: ember has its own attention."
    ),
    click.option(
        "--grammar-backend",
        default=None,
        type=click.Choice(["xgrammar", "outlines", "llguidance", "auto"]),
        help="Accepted: ember enforces grammars with its own engine.",
    ),
    click.option(
        "--enable-prefix-caching",
        is_flag=True,
        help="Accepted for vLLM: the prefix cache is on unless --disable-radix-cache.",
    ),
    click.option(
        "--enable-auto-tool-choice",
        is_flag=True,
        help="Accepted for vLLM: tool calls are always parsed (tool_choice auto).",
    ),
    click.option(
        "--disable-log-requests", is_flag=True, help="Accepted for vLLM: the default here."
    ),
    # SGLang command lines carry these two; here they change nothing, and saying so beats
    # "No such option" on a command copied from SGLang's docs.
    click.option(
        "--enable-metrics", is_flag=True, help="Accepted for SGLang: /metrics is always served."
    ),
    click.option(
        "--trust-remote-code",
        is_flag=True,
        help="Accepted for SGLang: ember runs no code from checkpoints.",
    ),
]


# SGLang / vLLM flags for features ember does not have: named as such, rather than answered with
# click's nearest spelling (--max-loras is not "Did you mean '--max-total-tokens'?").
UNSUPPORTED = {
    "lora": "LoRA adapters are not supported (serve a merged checkpoint)",
    "speculative": "speculative decoding is not supported",
    "dp-attention": "one device per server: no data-parallel attention",
    "ep-size": "one device per server: no expert parallelism",
    "expert-parallel": "one device per server: no expert parallelism",
    "pipeline-parallel": "one device per server: no pipeline parallelism",
    "pp-size": "one device per server: no pipeline parallelism",
    "torch-compile": "ember does not torch.compile the model",
    "cuda-graph": "ember captures no CUDA graphs",
    "swap-space": "ember does not swap KV to host memory (preempted requests recompute)",
}


class CompatCommand(click.Command):
    """Says which SGLang / vLLM flags ember does not have, instead of a misleading suggestion."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            name = error.option_name
            reason = next((r for key, r in UNSUPPORTED.items() if key in name), None)
            if reason is None:
                raise
            raise click.UsageError(
                f"{name} is an SGLang / vLLM flag ember does not take: {reason}.", ctx
            ) from None


def compat_options(command: F) -> F:
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def drop_no_ops(flags: dict[str, object]) -> None:
    for name in NO_OPS:
        flags.pop(name, None)
