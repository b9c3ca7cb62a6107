"""From ``ServerSettings`` to a model ready to serve: resolve, load, quantize, size the KV cache,
start the engine, warm up; each step reported through ``progress``.

MODEL is a catalog id (``@cf/moonshotai/kimi-k2.5`` -> the shipped kimi-tiny checkpoint) or a
checkpoint directory (config.json, safetensors, tokenizer.json). The tool-call syntax follows the
family (Kimi K2's sections for DeepseekV3, GLM-4.7's ``<tool_call>`` for GLM) unless
``--tool-call-parser`` says otherwise.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ember.errors import CheckpointError, ConfigError
from ember.models.catalog import default_catalog
from ember.models.chat_template import ChatTemplate
from ember.models.compute_dtype import resolve_compute_dtype
from ember.models.config import DEEPSEEK_V3, ModelConfig
from ember.models.constrain.tool_grammars import ToolFormat
from ember.models.constrain.vocab import TokenVocabulary
from ember.models.engine.async_engine import AsyncEngine
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.spec import KVCacheDtype, kv_capacity, kv_layout_for, parse_kv_dtype
from ember.models.loader import load_model
from ember.models.quant import QuantConfig, QuantizationReport, model_weight_bytes, quantize_model
from ember.models.server.answer_ids import AnswerIds
from ember.models.server.grammar_builds import GrammarBuilds
from ember.models.server.request_sampling import ServerSampler
from ember.models.server.sampling_defaults import SamplingDefaults, startup_line
from ember.models.server.settings import FLAGS, REASONING_PARSERS, ServerSettings
from ember.models.server.source_check import unknown_model
from ember.models.server.step_log import DecodeLog
from ember.models.tokenizer import Tokenizer

Progress = Callable[[str], None]
Log = Callable[..., None]  # (message, level="info")
_TOOL_PARSERS: dict[str, ToolFormat] = {
    "kimi_k2": "kimi",
    "glm": "glm45",  # SGLang's name for its GLM-4.5/4.6 parser
    "glm45": "glm45",
    "glm47": "glm47",
}


@dataclass(frozen=True, slots=True)
class ResolvedSource:
    directory: Path
    context_window: int | None  # the catalog id's, None for a bare directory
    tool_format: ToolFormat


@dataclass(frozen=True, slots=True)
class KVReport:
    dtype: str  # bf16 | fp8_e4m3 | fp8_e5m2 | float32
    budget_bytes: int
    capacity_tokens: int
    bytes_per_token: int
    page_size: int


def _silent(message: str, level: str = "info") -> None:
    pass


@dataclass(slots=True)
class ServedModel:
    """Everything the HTTP layer needs, built once at startup."""

    name: str  # --served-model-name, or MODEL as given
    aliases: frozenset[str]  # names a request's "model" may use
    source: str
    directory: Path
    config: ModelConfig
    tokenizer: Tokenizer
    vocab: TokenVocabulary
    llm: LLMEngine
    engine: AsyncEngine
    sampler: ServerSampler
    grammars: GrammarBuilds  # constrained requests' grammars, built off the engine thread
    eos_token_ids: frozenset[int]
    tool_format: ToolFormat
    context_length: int
    model_dtype: str
    weight_bytes: int
    weight_bytes_by_scheme: dict[str, int]
    quantization: QuantizationReport | None
    kv: KVReport
    created: int
    load_seconds: float
    log: Log = _silent  # a line for the server's log (ServerState.note once serving)
    log_requests: bool = False  # --log-requests: a line per finished request
    # --random-seed: draws a seed for each sampled request that brings none (None: the OS's)
    seeds: random.Random | None = None
    decode_log: DecodeLog | None = None
    # What a request that leaves a sampling field out gets (generation_config.json's, unless
    # --sampling-defaults openai).
    sampling_defaults: SamplingDefaults = SamplingDefaults()
    # The SamplingParams.logprobs_mode of the OpenAI routes (--logprobs-mode).
    openai_logprobs: str = "raw"
    # The engine ids behind answer ids that differ from them (/abort_request by either).
    answer_ids: AnswerIds = field(default_factory=AnswerIds)

    def shutdown(self) -> None:
        self.grammars.shutdown()
        self.engine.shutdown()


def resolve_source(settings: ServerSettings) -> ResolvedSource:
    """A catalog id or a checkpoint directory -> where its files are."""
    catalog = default_catalog()
    if settings.model in catalog:
        resolved = catalog.resolve(settings.model)  # CheckpointNotBuilt names the missing files
        entry = resolved.entry
        fmt: ToolFormat = "kimi" if entry.family == "kimi" else _glm_format(entry.model_id)
        return ResolvedSource(entry.checkpoint_dir, resolved.max_context, _override(settings, fmt))
    unknown = unknown_model(settings.model, catalog)
    if unknown is not None:
        raise unknown
    return ResolvedSource(Path(settings.model).expanduser(), None, _override(settings, "glm47"))


def _glm_format(model_id: str) -> ToolFormat:
    return "glm45" if any(v in model_id for v in ("glm-4.5", "glm-4.6")) else "glm47"


def _override(settings: ServerSettings, family_default: ToolFormat) -> ToolFormat:
    if settings.tool_call_parser != "auto":
        return _TOOL_PARSERS[settings.tool_call_parser]
    return family_default


def _usable_device(name: str) -> torch.device:
    """``--device`` as a torch device, or a ConfigError saying why this machine cannot use it."""
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(
                FLAGS,
                "--device",
                name,
                f"cpu: torch {torch.__version__} sees no CUDA device on this machine",
            )
        if device.index is not None and device.index >= count:
            raise ConfigError(
                FLAGS, "--device", name, f"cuda:0 to cuda:{count - 1} ({count} visible)"
            )
    return device


def load_served_model(settings: ServerSettings, progress: Progress) -> ServedModel:
    started = time.perf_counter()
    if settings.torch_threads is not None:
        torch.set_num_threads(settings.torch_threads)
    source = resolve_source(settings)
    progress(f"checkpoint {source.directory}")
    device = _usable_device(settings.device)
    compute = resolve_compute_dtype(settings.dtype, device)
    dtype_name, dtype = compute.name, compute.torch_dtype
    if settings.random_seed is not None:
        torch.manual_seed(settings.random_seed)
    loaded = load_model(source.directory, dtype=dtype, device=device)
    config = loaded.config
    tool_format = source.tool_format
    if settings.tool_call_parser == "auto" and source.context_window is None:
        tool_format = "kimi" if config.architecture == DEEPSEEK_V3 else "glm47"
    _check_parsers(settings, config)
    progress(f"loaded {config.architecture} weights in {dtype_name} on {device}")
    if compute.why is not None:
        progress(compute.why)
    report = None
    if settings.quantization != "none":
        quant = QuantConfig.from_flag(
            settings.quantization,
            targets=settings.quantization_targets,
            **({"group_size": group} if (group := settings.quantization_group_size) else {}),
        )
        report = quantize_model(loaded.model, quant)
        kernel = report.int4_kernel_dtype
        progress(
            f"quantized {sum(report.layers.values())} linear layers to {settings.quantization} "
            f"({settings.quantization_targets}): {report.bytes_before / 1e6:.1f} MB -> "
            f"{report.bytes_after / 1e6:.1f} MB"
            + (
                ""
                if kernel in (None, dtype)
                else f"; their matmuls run in {str(kernel).removeprefix('torch.')} (PyTorch's "
                f"CPU INT4 kernel is vectorised for BF16 only here), cast from {dtype_name} "
                "and back"
            )
        )
    defaults = SamplingDefaults()
    if settings.sampling_defaults == "model":
        defaults = SamplingDefaults.from_generation(loaded.generation, source.directory)
        line = startup_line(defaults)
        if line is not None:
            progress(line)
    weights = model_weight_bytes(loaded.model)
    tokenizer = _tokenizer(settings, source.directory, config)
    # Computed here, not by the first request (a real vocabulary's JSON is megabytes).
    if tokenizer.max_token_bytes is None:
        progress(
            "tokenizer: a text's token count has no bound from its size (this tokenizer may "
            "normalize or drop text), so over-long prompts are refused only once tokenized"
        )
    eos = frozenset(loaded.generation.eos_token_ids or config.eos_token_ids)
    vocab = _vocabulary(tokenizer, eos)
    kv = _kv_report(settings, config, weights.total, compute.kv_auto)
    note = None if settings.max_total_tokens else settings.kv_budget_note(kv.budget_bytes)
    if note is not None:
        progress(f"warning: {note}")
    context = _context_length(settings, config, source)
    engine_config = EngineConfig(
        kv_cache_dtype=settings.kv_cache_dtype,
        kv_cache_bytes=None if settings.max_total_tokens else kv.budget_bytes,
        max_total_tokens=settings.max_total_tokens,
        page_size=settings.page_size,
        max_num_seqs=settings.max_running_requests,
        max_num_batched_tokens=settings.step_tokens(context),
        max_model_len=context,
        enable_prefix_cache=not settings.disable_radix_cache,
        integrity=settings.integrity,
    )
    sampler = ServerSampler(vocab)
    llm = LLMEngine(
        loaded.model,
        kv_layout_for(config),
        engine_config,
        model_dtype=compute.kv_auto,
        sampler=sampler,
        eos_token_ids=eos,
    )
    capacity = llm.stats.pages_total * settings.page_size
    kv = KVReport(
        kv.dtype,
        # --max-total-tokens sized the pool, not the byte budget: report the pool's bytes.
        capacity * kv.bytes_per_token if settings.max_total_tokens else kv.budget_bytes,
        capacity,
        kv.bytes_per_token,
        settings.page_size,
    )
    progress(
        f"KV cache: {kv.capacity_tokens:,} tokens in {kv.dtype} "
        f"({kv.bytes_per_token} B/token, budget {kv.budget_bytes / 2**20:.1f} MiB), "
        f"integrity {settings.integrity}"
    )
    if settings.warmup:
        _warm_up(llm)
        progress("warm-up step done")
    decode_log = DecodeLog(llm.stats, settings.page_size, settings.decode_log_interval)
    engine = AsyncEngine(llm, on_step=decode_log)
    name = settings.served_model_name or settings.model
    return ServedModel(
        name=name,
        aliases=frozenset({name, settings.model, source.directory.name}),
        source=settings.model,
        directory=source.directory,
        config=config,
        tokenizer=tokenizer,
        vocab=vocab,
        llm=llm,
        engine=engine,
        sampler=sampler,
        grammars=GrammarBuilds(vocab),
        eos_token_ids=eos,
        tool_format=tool_format,
        context_length=llm.max_model_len,
        model_dtype=dtype_name,
        weight_bytes=weights.total,
        weight_bytes_by_scheme=dict(weights.by_scheme),
        quantization=report,
        kv=kv,
        created=int(time.time()),
        load_seconds=time.perf_counter() - started,
        log_requests=settings.log_requests,
        seeds=random.Random(settings.random_seed) if settings.random_seed is not None else None,
        decode_log=decode_log,
        sampling_defaults=defaults,
        openai_logprobs="processed_cut"
        if settings.logprobs_mode == "processed_logprobs"
        else "raw",
    )


def _check_parsers(settings: ServerSettings, config: ModelConfig) -> None:
    """``--tool-call-parser`` / ``--reasoning-parser`` must name this model's own format: ember
    parses each family's syntax only, and a wrong one would turn every call into plain text."""
    family = "kimi" if config.architecture == DEEPSEEK_V3 else "glm"
    own = {"kimi": "kimi_k2", "glm": "glm45, glm47 or glm"}[family]
    parser = settings.tool_call_parser
    if parser != "auto" and (parser == "kimi_k2") != (family == "kimi"):
        raise ConfigError(FLAGS, "--tool-call-parser", parser, f"{own} ({config.architecture})")
    reasoning = settings.reasoning_parser
    if reasoning is not None and REASONING_PARSERS[reasoning] != family:
        names = ", ".join(k for k, v in REASONING_PARSERS.items() if v == family)
        raise ConfigError(
            FLAGS, "--reasoning-parser", reasoning, f"{names} ({config.architecture})"
        )


def _tokenizer(settings: ServerSettings, directory: Path, config: ModelConfig) -> Tokenizer:
    """The checkpoint's tokenizer, or ``--tokenizer-path``'s; ``--chat-template`` (a Jinja
    file) replaces its chat template, as in SGLang and vLLM."""
    tokenizer = Tokenizer.from_dir(settings.tokenizer_path or directory)
    if tokenizer.vocab_size > config.vocab_size:
        raise ConfigError(
            FLAGS,
            "--tokenizer-path",
            settings.tokenizer_path,
            f"a tokenizer of at most the model's {config.vocab_size} tokens "
            f"(this one has {tokenizer.vocab_size})",
        )
    if settings.chat_template is None:
        return tokenizer
    path = Path(settings.chat_template)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(
            FLAGS, "--chat-template", settings.chat_template, f"a readable Jinja file ({error})"
        ) from None
    template = ChatTemplate(source, tokenizer.special_tokens, origin=str(path))
    return replace(tokenizer, chat_template=template)


def _vocabulary(tokenizer: Tokenizer, eos: frozenset[int]) -> TokenVocabulary:
    """The tokenizer as constrained decoding sees it: bytes per ordinary token, added tokens as
    atomic symbols, the EOS ids as the grammar's end."""
    added = tokenizer.backend.get_added_tokens_decoder()
    special = {token_id: token.content for token_id, token in added.items()}
    tokens = [None if i in special else data for i, data in enumerate(tokenizer.token_bytes)]
    return TokenVocabulary(tokens, special, eos)


def _kv_report(
    settings: ServerSettings, config: ModelConfig, weight_bytes: int, kv_auto: KVCacheDtype
) -> KVReport:
    kv_dtype = parse_kv_dtype(settings.kv_cache_dtype, kv_auto)
    spec = kv_layout_for(config, kv_dtype)
    total, available = _memory(settings)
    budget = settings.kv_budget(total, available)
    capacity = kv_capacity(spec, budget, settings.page_size)
    return KVReport(
        kv_dtype,
        budget,
        capacity.num_pages * settings.page_size,
        spec.cell_size,
        settings.page_size,
    )


def _memory(settings: ServerSettings) -> tuple[int, int]:
    """(total, available now) bytes of the device the KV cache lives on."""
    if settings.is_cuda:
        free, total = torch.cuda.mem_get_info(torch.device(settings.device))
        return int(total), int(free)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    available = total
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return total, available


def _context_length(settings: ServerSettings, config: ModelConfig, source: ResolvedSource) -> int:
    limit = config.max_position_embeddings
    if source.context_window is not None:
        limit = min(limit, source.context_window)
    if settings.context_length is not None:
        if settings.context_length > config.max_position_embeddings:
            raise CheckpointError(
                f"--context-length {settings.context_length} exceeds the checkpoint's "
                f"max_position_embeddings ({config.max_position_embeddings})"
            )
        limit = settings.context_length
    return limit


def _warm_up(llm: LLMEngine) -> None:
    """One short request through every code path a first request takes (prefill, decode)."""
    llm.generate([[0, 1, 2, 3]], StopCriteria(max_tokens=2, ignore_eos=True))
