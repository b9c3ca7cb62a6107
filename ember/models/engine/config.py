"""Engine knobs, validated once (torch-free); names follow nano-vllm and sglang.launch_server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ember.errors import ConfigError

IntegrityMode = Literal["off", "sampled", "full"]
INTEGRITY_MODES = ("off", "sampled", "full")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the engine schedules and caches.

    ``kv_cache_bytes`` is the KV byte budget (the model server derives it from
    ``--mem-fraction-static`` or takes it directly); ``max_total_tokens`` overrides the capacity in
    tokens (SGLang's debug flag of that name).
    """

    kv_cache_dtype: str = "auto"  # auto | float32 | bf16 | fp8_e4m3 | fp8_e5m2
    kv_cache_bytes: int | None = None
    max_total_tokens: int | None = None
    page_size: int = 16
    max_num_seqs: int = 64  # --max-running-requests
    max_num_batched_tokens: int = 512  # tokens per step: the chunked-prefill budget
    max_model_len: int = 4096
    enable_prefix_cache: bool = True
    integrity: IntegrityMode = "sampled"
    # Sampled mode re-digests each page once every this many steps (and checks every page's
    # ownership every step); full mode re-digests everything read, every step.
    integrity_sample_period: int = 64
    max_integrity_retries: int = 2  # recomputes per request before it fails with KVIntegrityError
    # Admission reserves, for every running request and the one admitted, the pages of its
    # remaining ``max_tokens`` times this ratio (SGLang's ``new_token_ratio``): it starts at
    # ``init_new_token_ratio``, falls linearly to ``min_new_token_ratio`` over
    # ``new_token_ratio_decay_steps`` steps without a preemption, and a preemption raises it to
    # the share of ``max_tokens`` the requests still running have already needed. SGLang's
    # defaults (0.7; 0.098, here 0.1; 600).
    init_new_token_ratio: float = 0.7
    min_new_token_ratio: float = 0.1
    new_token_ratio_decay_steps: int = 600
    # Replace an untied BF16 lm_head by its oneDNN-prepacked form (bit-identical logits, ~20%
    # less CPU per call, no second copy of the matrix); off = the plain nn.Linear reference.
    pack_lm_head: bool = True

    def __post_init__(self) -> None:
        def need(key: str, value: object, ok: bool, expected: str) -> None:
            if not ok:
                raise ConfigError("engine", key, value, expected)

        need("page_size", self.page_size, self.page_size > 0, "a positive number of tokens")
        need("max_num_seqs", self.max_num_seqs, self.max_num_seqs > 0, "> 0")
        need(
            "max_num_batched_tokens",
            self.max_num_batched_tokens,
            self.max_num_batched_tokens >= self.max_num_seqs,
            f">= max_num_seqs ({self.max_num_seqs}), so every running request can decode",
        )
        need("max_model_len", self.max_model_len, self.max_model_len > 1, "> 1")
        need("integrity", self.integrity, self.integrity in INTEGRITY_MODES, "off|sampled|full")
        need(
            "integrity_sample_period",
            self.integrity_sample_period,
            self.integrity_sample_period >= 1,
            ">= 1",
        )
        need(
            "max_integrity_retries",
            self.max_integrity_retries,
            self.max_integrity_retries >= 0,
            ">= 0",
        )
        need(
            "init_new_token_ratio",
            self.init_new_token_ratio,
            0.0 <= self.min_new_token_ratio <= self.init_new_token_ratio <= 1.0,
            f"between min_new_token_ratio ({self.min_new_token_ratio}) and 1",
        )
        need("min_new_token_ratio", self.min_new_token_ratio, self.min_new_token_ratio >= 0, ">= 0")
        need(
            "new_token_ratio_decay_steps",
            self.new_token_ratio_decay_steps,
            self.new_token_ratio_decay_steps >= 1,
            ">= 1",
        )
        if self.kv_cache_bytes is None and self.max_total_tokens is None:
            raise ConfigError(
                "engine", "kv_cache_bytes", None, "a KV byte budget or max_total_tokens"
            )
        if self.kv_cache_bytes is not None:
            need("kv_cache_bytes", self.kv_cache_bytes, self.kv_cache_bytes > 0, "> 0")
        if self.max_total_tokens is not None:
            need(
                "max_total_tokens",
                self.max_total_tokens,
                self.max_total_tokens >= self.page_size,
                f">= page_size ({self.page_size})",
            )
