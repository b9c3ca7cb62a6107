"""The model server's settings: every ``ember models serve`` flag, typed and validated once.

Torch-free, so the CLI can validate flags (and ``--help`` can show them) before the engine loads.
Flag names follow ``sglang.launch_server`` where SGLang has the knob (``--kv-cache-dtype``,
``--quantization``, ``--mem-fraction-static``, ``--max-running-requests``,
``--chunked-prefill-size``, ``--served-model-name``, ``--page-size``, ``--context-length``,
``--max-total-tokens``, ``--disable-radix-cache``, ``--tool-call-parser``, ``--api-key``); ember's
own knobs (``--kv-cache-bytes``, ``--integrity``, the INT4 policy) are named in the same style.

The KV budget: ``--kv-cache-bytes`` wins; else ``--mem-fraction-static`` takes SGLang's rule
(what memory remains after the weights, minus ``(1 - fraction)`` of the total); else a fixed
default on CPU (a shared box should not hand most of its RAM to one model) and SGLang's
``0.88`` on CUDA. On CPU a fraction is of the host's RAM, as on SGLang's CPU backend: the
startup log warns with the byte count (``kv_budget_note``).

``--chunked-prefill-size`` is the engine's token budget per step, decodes included, so it must
cover ``--max-running-requests``; SGLang's ``-1`` (no chunked prefill) makes it the context
length plus one decode per running request. ``--quantization-targets auto`` and the INT4 group
size take the method's defaults (``ember/models/quant_options.py``).

``--integrity auto`` (the default) is ``sampled`` on CPU and ``off`` on CUDA: the checker stamps
and reads KV pages in host memory, so asking for it with ``--device cuda`` is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ember.errors import ConfigError
from ember.models.quant_options import DEFAULT_INT4_GROUP_SIZE, DEFAULT_TARGETS, INT4_GROUP_SIZES

FLAGS = "ember models serve"
DEFAULT_PORT = 30000  # sglang.launch_server's default
DEFAULT_CPU_KV_BYTES = 256 * 2**20
DEFAULT_CUDA_MEM_FRACTION = 0.88
# --health-check-timeout: /health answers 503 once the engine has work and finished no step for
# this long. SGLang's health_generate allows 20 s (SGLANG_HEALTH_CHECK_TIMEOUT) for GPU steps of
# milliseconds; ember's longest legitimate step is a CPU prefill of a whole 4,095-token prompt in
# one chunk: 9.8 s (glm-5.2, one torch thread, load average 10 on 2 cores; bench/longest_step.py),
# so the bound is three times that.
DEFAULT_HEALTH_CHECK_TIMEOUT_S = 30.0
KV_CACHE_DTYPES = ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8", "float32")
MODEL_DTYPES = ("auto", "bfloat16", "bf16", "float32", "fp32", "float")
# SGLang's and vLLM's float16 spellings: taken by the command line so the refusal says why.
HALF_DTYPES = ("half", "float16")
# --chunked-prefill-size -1: no chunking (SGLang's spelling).
NO_CHUNKING = -1
QUANTIZATIONS = ("none", "fp8", "int4")
QUANT_TARGETS = ("auto", "experts", "all")
INTEGRITY_MODES = ("auto", "off", "sampled", "full")
# SGLang's "glm" is its GLM-4.5/4.6 parser.
TOOL_CALL_PARSERS = ("auto", "kimi_k2", "glm", "glm45", "glm47")
# The reasoning formats ember parses, under SGLang's and vLLM's names: each family has one.
REASONING_PARSERS = {"glm45": "glm", "glm47": "glm", "kimi": "kimi", "kimi_k2": "kimi"}
SAMPLING_DEFAULTS = ("model", "openai")
# vLLM's --logprobs-mode values ember has (its raw_logits / processed_logits put logits, not
# logprobs, in the logprobs fields: not offered).
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
ONE_DEVICE = (
    "1: ember runs one model replica on one device (for more, run one server per device "
    "behind `ember serve`'s pool, or SGLang itself)"
)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)


def parse_bytes(text: str | int, flag: str = "--kv-cache-bytes") -> int:
    """``1073741824``, ``512MiB``, ``1GiB``, ``64M`` (decimal), ``2GB`` -> bytes."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(str(text))
        if match is None:
            raise ConfigError(FLAGS, flag, text, "a byte count such as 268435456, 256MiB or 1GiB")
        number, unit = float(match.group(1)), (match.group(2) or "").upper()
        letter = unit[0] if unit and unit[0] in "KMGT" else ""
        step = 1024 if "I" in unit else 1000
        base = step ** ("KMGT".index(letter) + 1) if letter else 1
        value = int(number * base)
    if value <= 0:
        raise ConfigError(FLAGS, flag, text, "a positive byte count")
    return value


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What ``ember models serve`` was asked to do (see the module docstring)."""

    model: str  # a catalog id (@cf/...) or a checkpoint directory
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    device: str = "cpu"
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str = "none"
    # None: the INT4 default; a size is refused with any other --quantization.
    quantization_group_size: int | None = None
    # auto: the method's own (DEFAULT_TARGETS: fp8 every linear layer, int4 the routed experts).
    quantization_targets: Literal["auto", "experts", "all"] = "auto"
    kv_cache_bytes: int | None = None
    mem_fraction_static: float | None = None
    max_total_tokens: int | None = None
    max_running_requests: int = 128
    chunked_prefill_size: int = 1024  # NO_CHUNKING (-1): a whole prompt per step
    page_size: int = 16
    context_length: int | None = None
    # auto: sampled on CPU; off on CUDA, where the checker (which reads host memory) cannot run.
    integrity: Literal["auto", "off", "sampled", "full"] = "auto"
    disable_radix_cache: bool = False
    served_model_name: str | None = None
    tool_call_parser: str = "auto"
    api_key: str | None = None
    torch_threads: int | None = None
    warmup: bool = True
    # SGLang's / vLLM's launch flags that ember honours (docs: docs/model-server.md).
    random_seed: int | None = None  # seeds the requests that bring no seed of their own
    log_level: str = "info"  # request-time lines: info (stats, --log-requests), warning
    log_requests: bool = False  # one line per finished request
    decode_log_interval: int = 40  # SGLang's "Decode batch." line every N decode steps
    health_check_timeout: float = DEFAULT_HEALTH_CHECK_TIMEOUT_S  # a stalled engine: /health 503
    max_prefill_tokens: int | None = None  # caps the step budget (--chunked-prefill-size)
    chat_template: str | None = None  # a Jinja file replacing the checkpoint's template
    tokenizer_path: str | None = None  # a directory with tokenizer.json (default: MODEL's)
    reasoning_parser: str | None = None  # must name the model's own format
    # model: generation_config.json's sampling defaults fill what a request leaves out (vLLM's
    # --generation-config auto, SGLang's --sampling-defaults model); openai: they do not.
    sampling_defaults: Literal["model", "openai"] = "model"
    # vLLM's --logprobs-mode for the OpenAI routes (/generate reports SGLang's processed ones).
    logprobs_mode: Literal["raw_logprobs", "processed_logprobs"] = "raw_logprobs"
    tp_size: int = 1
    dp_size: int = 1

    def __post_init__(self) -> None:
        def need(key: str, value: object, ok: bool, expected: str) -> None:
            if not ok:
                raise ConfigError(FLAGS, key, value, expected)

        need("MODEL", self.model, bool(self.model), "a catalog id or a checkpoint directory")
        need("--port", self.port, 0 <= self.port <= 65535, "a TCP port (0 picks a free one)")
        need(
            "--device",
            self.device,
            bool(re.fullmatch(r"cpu|cuda(:\d+)?", self.device)),
            "cpu, cuda or cuda:N",
        )
        need(
            "--dtype",
            self.dtype,
            self.dtype in MODEL_DTYPES,
            "auto, bfloat16 or float32 (ember's kernels compute in BF16 or float32, not float16;"
            " a float16 checkpoint is served in BF16 by auto)"
            if self.dtype in HALF_DTYPES
            else "auto, bfloat16 or float32",
        )
        need(
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            self.kv_cache_dtype in KV_CACHE_DTYPES,
            "auto, bf16, fp8_e4m3 or fp8_e5m2",
        )
        need(
            "--quantization",
            self.quantization,
            self.quantization in QUANTIZATIONS,
            "none, fp8 or int4",
        )
        self._resolve_quantization(need)
        if self.mem_fraction_static is not None:
            need(
                "--mem-fraction-static",
                self.mem_fraction_static,
                0.0 < self.mem_fraction_static < 1.0,
                "a fraction between 0 and 1",
            )
        if self.kv_cache_bytes is not None:
            need("--kv-cache-bytes", self.kv_cache_bytes, self.kv_cache_bytes > 0, "> 0")
        need("--page-size", self.page_size, self.page_size >= 1, "a positive number of tokens")
        need(
            "--max-running-requests",
            self.max_running_requests,
            self.max_running_requests >= 1,
            ">= 1",
        )
        self._check_step_budget(need)
        if self.max_total_tokens is not None:
            need(
                "--max-total-tokens",
                self.max_total_tokens,
                self.max_total_tokens >= self.page_size,
                f">= --page-size ({self.page_size})",
            )
        if self.context_length is not None:
            need("--context-length", self.context_length, self.context_length > 1, "> 1")
        need(
            "--integrity",
            self.integrity,
            self.integrity in INTEGRITY_MODES,
            "auto, off, sampled or full",
        )
        if self.integrity == "auto":
            object.__setattr__(self, "integrity", "off" if self.is_cuda else "sampled")
        need(
            "--integrity",
            self.integrity,
            self.integrity == "off" or not self.is_cuda,
            f"off (or auto) with --device {self.device}: the KV integrity checker stamps and "
            "reads pages in host memory, so it runs on CPU pools only",
        )
        need(
            "--tool-call-parser",
            self.tool_call_parser,
            self.tool_call_parser in TOOL_CALL_PARSERS,
            ", ".join(TOOL_CALL_PARSERS),
        )
        if self.torch_threads is not None:
            need("--torch-threads", self.torch_threads, self.torch_threads >= 1, ">= 1")
        need("--tp-size", self.tp_size, self.tp_size == 1, ONE_DEVICE)
        need("--dp-size", self.dp_size, self.dp_size == 1, ONE_DEVICE)
        need("--log-level", self.log_level, self.log_level in LOG_LEVELS, ", ".join(LOG_LEVELS))
        need(
            "--logprobs-mode",
            self.logprobs_mode,
            self.logprobs_mode in LOGPROBS_MODES,
            " or ".join(LOGPROBS_MODES),
        )
        need(
            "--sampling-defaults",
            self.sampling_defaults,
            self.sampling_defaults in SAMPLING_DEFAULTS,
            "model or openai",
        )
        need(
            "--decode-log-interval",
            self.decode_log_interval,
            self.decode_log_interval >= 0,
            ">= 0 (0: no stats line)",
        )
        need(
            "--health-check-timeout",
            self.health_check_timeout,
            self.health_check_timeout > 0,
            "seconds > 0 (an engine with work and no finished step for this long is stalled)",
        )
        if self.reasoning_parser is not None:
            need(
                "--reasoning-parser",
                self.reasoning_parser,
                self.reasoning_parser in REASONING_PARSERS,
                "the model's own format: " + ", ".join(REASONING_PARSERS),
            )
        if self.max_prefill_tokens is not None:
            need(
                "--max-prefill-tokens",
                self.max_prefill_tokens,
                self.max_prefill_tokens >= self.max_running_requests,
                f">= --max-running-requests ({self.max_running_requests})",
            )

    def _resolve_quantization(self, need: Callable[[str, object, bool, str], None]) -> None:
        """The group size and targets a method leaves open take its defaults (quant_options);
        either flag given with a method it does not apply to is refused, not ignored."""
        method = self.quantization
        need(
            "--quantization-targets",
            self.quantization_targets,
            self.quantization_targets in QUANT_TARGETS,
            "auto (fp8: all, int4: experts), experts (routed experts only) or all (every "
            "linear layer)",
        )
        need(
            "--quantization-targets",
            self.quantization_targets,
            self.quantization_targets == "auto" or method in DEFAULT_TARGETS,
            "only with --quantization fp8 or int4 (nothing is quantized)",
        )
        if self.quantization_targets == "auto" and method in DEFAULT_TARGETS:
            object.__setattr__(self, "quantization_targets", DEFAULT_TARGETS[method])
        size = self.quantization_group_size
        if method != "int4":
            need(
                "--quantization-group-size",
                size,
                size is None,
                f"only with --quantization int4 (INT4's scale group; --quantization {method} "
                "has none)",
            )
            return
        size = DEFAULT_INT4_GROUP_SIZE if size is None else size
        *most, last = INT4_GROUP_SIZES
        need(
            "--quantization-group-size",
            size,
            size in INT4_GROUP_SIZES,
            f"{', '.join(map(str, most))} or {last} (PyTorch's CPU INT4 kernel's group sizes)",
        )
        object.__setattr__(self, "quantization_group_size", size)

    def _check_step_budget(self, need: Callable[[str, object, bool, str], None]) -> None:
        chunk, running = self.chunked_prefill_size, self.max_running_requests
        if chunk == NO_CHUNKING:
            return
        need("--chunked-prefill-size", chunk, chunk >= 1, "a token count, or -1 (no chunking)")
        need(
            "--chunked-prefill-size",
            chunk,
            chunk >= running,
            f">= --max-running-requests ({running}): it is ember's token budget per engine "
            "step, and each running request's decode token counts in it beside the prefill "
            f"chunks; pass --chunked-prefill-size {running} or more, or -1 (no chunking: a "
            "whole prompt per step)",
        )

    def step_tokens(self, context_length: int) -> int:
        """Tokens per engine step: the chunk size, capped by SGLang's prefill budget (a step's
        prefill tokens never exceed either). With -1 (SGLang: no chunked prefill) a step holds
        a whole prompt of up to ``context_length`` tokens beside every running request's
        decode token."""
        chunk = self.chunked_prefill_size
        if chunk == NO_CHUNKING:
            chunk = context_length + self.max_running_requests
        if self.max_prefill_tokens is None:
            return chunk
        return min(chunk, self.max_prefill_tokens)

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def kv_budget_note(self, budget: int) -> str | None:
        """A warning for the startup log when ``--mem-fraction-static`` sized a CPU KV cache.
        SGLang's CPU backend takes the fraction of host memory too (its memory probe reads the
        host's available RAM there), but a fraction from a GPU launch script then hands most
        of a shared box to one model's cache: say how much, and how to size it instead."""
        if self.is_cuda or self.kv_cache_bytes is not None or self.mem_fraction_static is None:
            return None
        return (
            f"--mem-fraction-static {self.mem_fraction_static} on --device {self.device} takes "
            f"{budget / 2**30:.2f} GiB of host memory for the KV cache (the fraction is of "
            "this machine's RAM, as on SGLang's CPU backend); pass --kv-cache-bytes to size "
            f"it (e.g. {DEFAULT_CPU_KV_BYTES // 2**20}MiB, the CPU default)"
        )

    def kv_budget(self, total_bytes: int, available_after_weights: int) -> int:
        """The KV byte budget (see the module docstring); raises when nothing is left."""
        if self.kv_cache_bytes is not None:
            if self.kv_cache_bytes > available_after_weights:
                raise ConfigError(
                    FLAGS,
                    "--kv-cache-bytes",
                    f"{self.kv_cache_bytes / 2**30:.2f} GiB",
                    f"at most the {available_after_weights / 2**30:.2f} GiB free on "
                    f"{'the GPU' if self.is_cuda else 'this machine'} after the weights",
                )
            return self.kv_cache_bytes
        fraction = self.mem_fraction_static
        if fraction is None and not self.is_cuda:
            return DEFAULT_CPU_KV_BYTES
        fraction = DEFAULT_CUDA_MEM_FRACTION if fraction is None else fraction
        budget = int(available_after_weights - total_bytes * (1.0 - fraction))
        if budget <= 0:
            raise ConfigError(
                FLAGS,
                "--mem-fraction-static",
                fraction,
                f"a larger fraction: {available_after_weights / 2**30:.2f} GiB are free after "
                f"the weights, and (1 - {fraction}) of {total_bytes / 2**30:.2f} GiB stay "
                "reserved, leaving nothing for the KV cache (or pass --kv-cache-bytes)",
            )
        return budget
