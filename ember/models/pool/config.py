"""Pool configuration: which replicas serve each model id, on which backend, device and flags.

In ``ember.yaml`` it sits under the ``ai`` binding (``ember serve`` reads the same shape from the
operator's config)::

    ai:
      binding: AI
      models:
        "@cf/zai-org/glm-4.7-flash":
          replicas: 2                    # or a list of per-replica mappings
          device: cpu                    # cpu | cuda | cuda:N (sglang: cuda:0,1,...)
          kv_cache_dtype: fp8_e4m3
          quantization: int4
          checkpoint: ./ckpt/glm         # point the id at a checkpoint directory
        "@cf/moonshotai/kimi-k2-instruct":
          checkpoint: kimi-tiny          # or at a checkpoint ember ships, by its name
        "@cf/meta/llama-3.1-8b-instruct":
          checkpoint: ./ckpt/glm
          schema: classic                # Workers AI schema of env.AI.run (default: the id's)
        "@cf/moonshotai/kimi-k2.6":
          backend: sglang                # launched as python -m sglang.launch_server
          model_path: /models/Kimi-K2.6  # what SGLang loads (or checkpoint); required
          tp: 8
        "@cf/zai-org/glm-5.2":
          url: http://10.0.0.5:30000     # attached: a server running elsewhere
      pool: {start: lazy, startup_timeout_s: 600}

On ``ember dev`` ids that are not configured get one ember replica on the CPU; ``ember serve``
serves only the configured ids (``pool: {serve_unconfigured: true}`` opts back in). Every error
names the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from ember.errors import ConfigError
from ember.models.catalog import SHIPPED, SHIPPED_CHECKPOINTS
from ember.models.pool.fair import AccountCap
from ember.models.pool.settings import POOL_KEYS, PoolSettings, parse_pool_settings
from ember.models.pool.slot_args import slots_from_args

__all__ = ["POOL_KEYS", "ModelServing", "PoolConfig", "PoolSettings", "ReplicaConfig"]

Backend = Literal["ember", "sglang"]
BACKENDS = ("ember", "sglang")
EMBER_KV_DTYPES = ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8", "float32")
SGLANG_KV_DTYPES = ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2")
EMBER_QUANTIZATIONS = ("none", "fp8", "int4")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+(,\d+)*)?)$")
_URL = re.compile(r"^https?://[^\s/]+(/[^\s]*)?$")
MODEL_KEYS = frozenset(
    {
        "backend",
        "replicas",
        "device",
        "url",
        "tp",
        "kv_cache_dtype",
        "quantization",
        "max_running_requests",
        "args",
        "env",
        "served_model_name",
        "checkpoint",
        "model_path",
        "context_window",
        "max_queued_requests",
        "max_account_requests",
        "schema",
    }
)
# Workers AI's text-generation schemas (ember.bindings.ai.model_schema picks the default).
SCHEMAS = ("classic", "chat-completions", "responses")
REPLICA_KEYS = frozenset(
    {
        "backend",
        "device",
        "url",
        "tp",
        "kv_cache_dtype",
        "quantization",
        "max_running_requests",
        "args",
        "env",
        "served_model_name",
        "model_path",
    }
)
DEFAULT_SLOTS = 128  # requests a replica runs at once when its max_running_requests is unset


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """One replica: launched (``url`` None) or attached by URL."""

    backend: Backend = "ember"
    device: str = "cpu"
    url: str | None = None
    tp: int = 1
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    max_running_requests: int | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    served_model_name: str | None = None
    model_path: str | None = None  # sglang: --model-path (default: the checkpoint directory)
    # Where this replica was configured ("ember.yaml", 'ai.models."<id>"'), so an error it
    # causes can name the key to fix; not part of its identity.
    file: str = field(default="", compare=False)
    key: str = field(default="", compare=False)

    @property
    def launched(self) -> bool:
        """True when the pool starts (and restarts) this replica's process."""
        return self.url is None

    @property
    def slots(self) -> int:
        """Requests the pool sends this replica at once."""
        return self.max_running_requests or DEFAULT_SLOTS

    def describe(self) -> str:
        """``ember cpu int4 fp8_e4m3`` / ``sglang cuda tp8`` / ``url http://...``."""
        if self.url is not None:
            return f"attached {self.url}"
        parts = [self.backend, self.device]
        if self.tp != 1:
            parts.append(f"tp{self.tp}")
        if self.quantization and self.quantization != "none":
            parts.append(self.quantization)
        if self.kv_cache_dtype and self.kv_cache_dtype != "auto":
            parts.append(f"kv {self.kv_cache_dtype}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class ModelServing:
    """How one model id is served."""

    model_id: str
    replicas: tuple[ReplicaConfig, ...] = (ReplicaConfig(),)
    checkpoint: Path | None = None  # catalog override: serve the id from this directory
    context_window: int | None = None
    max_queued_requests: int = 256
    # "classic" | "chat-completions" | "responses" (None: the id's platform schema). Read by
    # the gateway per request; not part of how the replicas run, so changing it restarts none.
    schema: str | None = field(default=None, compare=False)
    max_account_requests: int | None = None  # one account's cap (fair.py); None: the share

    def account_cap(self, share: float | None) -> AccountCap | None:
        """One account's cap on this id: ``max_account_requests``, else every replica's slots
        plus ``share`` of the queue, at most that share of the queue waiting, else none."""
        if self.max_account_requests is not None:
            key = f'ai.models."{self.model_id}".max_account_requests'
            return AccountCap(self.max_account_requests, key)
        if share is None:
            return None
        # The share applies to the queue, not the slots: a share of running + queued refused a
        # lone account with a small queue while half the slots sat idle, and a freed slot goes
        # to another waiting account first anyway (fair.py). Rounded down, so an account that
        # runs on every slot leaves the rest of the queue (all of a one-place queue) to others.
        # The waiting bound holds whoever runs: with others on the slots, one account still
        # takes only its share of the queue (at least one place, or nobody could wait in a
        # one-place queue).
        running = sum(replica.slots for replica in self.replicas)
        queued = self.max_queued_requests
        why = f"ai.pool.account_share {share:g} of {queued} queued, plus all {running} running"
        return AccountCap(running + int(share * queued), why, max(1, int(share * queued)))


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """Every configured model plus the shared settings."""

    models: Mapping[str, ModelServing] = field(default_factory=dict)
    settings: PoolSettings = field(default_factory=PoolSettings)

    @property
    def serves_unconfigured(self) -> bool:
        """Whether a catalog id nobody configured gets a replica (``serve_unconfigured``)."""
        return self.settings.serve_unconfigured is not False

    def serving(self, model_id: str) -> ModelServing:
        """The configured serving of ``model_id``, or one ember CPU replica."""
        return self.models.get(model_id) or ModelServing(model_id)

    def with_settings(self, **changes: object) -> PoolConfig:
        """A copy with some settings changed (tests, ``ember serve`` flags)."""
        return replace(self, settings=replace(self.settings, **changes))  # type: ignore[arg-type]


def parse_pool_config(
    models: object,
    pool: object = None,
    *,
    file: str = "ember.yaml",
    key: str = "ai",
    base: Path | None = None,
) -> PoolConfig:
    """``models`` and ``pool`` as written under ``key`` -> ``PoolConfig`` (ConfigError on bad).

    Relative ``checkpoint`` paths are relative to ``base`` (the config file's directory).
    """
    parsed: dict[str, ModelServing] = {}
    if models is not None:
        if not isinstance(models, dict):
            raise ConfigError(file, f"{key}.models", models, "a mapping of model ids to settings")
        for model_id, value in models.items():
            where = f'{key}.models."{model_id}"'
            if not isinstance(model_id, str) or not model_id.strip():
                raise ConfigError(file, f"{key}.models", model_id, "model ids as strings")
            parsed[model_id] = _model(model_id, value, file, where, base)
    return PoolConfig(MappingProxyType(parsed), parse_pool_settings(pool, file, f"{key}.pool"))


def _model(model_id: str, value: object, file: str, where: str, base: Path | None) -> ModelServing:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ConfigError(file, where, value, "a mapping such as {replicas: 2, device: cpu}")
    unknown = sorted(set(value) - MODEL_KEYS)
    if unknown:
        raise ConfigError(file, f"{where}.{unknown[0]}", unknown[0], _one_of(MODEL_KEYS))
    shared = {k: v for k, v in value.items() if k in REPLICA_KEYS}
    replicas_value = value.get("replicas", 1)
    if isinstance(replicas_value, bool) or not isinstance(replicas_value, int | list):
        raise ConfigError(
            file, f"{where}.replicas", replicas_value, "a count (1-64) or a list of replicas"
        )
    if isinstance(replicas_value, int):
        if not 1 <= replicas_value <= 64:
            raise ConfigError(file, f"{where}.replicas", replicas_value, "a count from 1 to 64")
        if "url" in shared and replicas_value != 1:
            raise ConfigError(
                file, f"{where}.replicas", replicas_value, "1 with url (list one url per replica)"
            )
        replicas = tuple(_replica(shared, file, where) for _ in range(replicas_value))
    else:
        if not replicas_value or len(replicas_value) > 64:
            raise ConfigError(file, f"{where}.replicas", replicas_value, "1 to 64 replicas")
        items = []
        for index, item in enumerate(replicas_value):
            item_where = f"{where}.replicas[{index}]"
            if not isinstance(item, dict):
                raise ConfigError(file, item_where, item, "a mapping such as {device: cuda:0}")
            extra = sorted(set(item) - REPLICA_KEYS)
            if extra:
                raise ConfigError(file, f"{item_where}.{extra[0]}", extra[0], _one_of(REPLICA_KEYS))
            items.append(_replica({**shared, **item}, file, item_where))
        replicas = tuple(items)
    checkpoint = value.get("checkpoint")
    if checkpoint is not None and (not isinstance(checkpoint, str) or not checkpoint):
        raise ConfigError(file, f"{where}.checkpoint", checkpoint, "a checkpoint directory path")
    window = value.get("context_window")
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int) or window < 2
    ):
        raise ConfigError(file, f"{where}.context_window", window, "a token count >= 2")
    queued = value.get("max_queued_requests", 256)
    if isinstance(queued, bool) or not isinstance(queued, int) or not 0 <= queued <= 100_000:
        raise ConfigError(file, f"{where}.max_queued_requests", queued, "0 to 100000")
    per_account = value.get("max_account_requests")
    if per_account is not None and (
        isinstance(per_account, bool)
        or not isinstance(per_account, int)
        or not 1 <= per_account <= 100_000
    ):
        raise ConfigError(file, f"{where}.max_account_requests", per_account, "1 to 100000")
    schema = value.get("schema")
    if schema is not None and schema not in SCHEMAS:
        raise ConfigError(file, f"{where}.schema", schema, " or ".join(SCHEMAS))
    for replica in replicas:
        if replica.backend == "sglang" and replica.launched and not replica.model_path:
            if not checkpoint:
                # Refused here: a launch could only fail later, on a tenant's request.
                raise ConfigError(
                    file,
                    f"{where}.checkpoint",
                    None,
                    "a checkpoint directory (or model_path: a path or HF id SGLang loads) for "
                    "an sglang replica; the shipped tiny checkpoints are for ember replicas",
                )
    directory = _checkpoint_directory(checkpoint, base) if checkpoint else None
    return ModelServing(
        model_id,
        replicas,
        directory,
        window,
        queued,
        schema,
        per_account,
    )


def _checkpoint_directory(checkpoint: str, base: Path | None) -> Path:
    """The directory ``checkpoint`` names: a path (relative to ``base``), else, when nothing is
    there, a checkpoint ember ships by its name (``kimi-tiny``: what ``ember ai models`` shows
    under SERVED FROM), so that a config need not spell where ember is installed."""
    directory = Path(checkpoint).expanduser()
    if not directory.is_absolute() and base is not None:
        directory = base / directory
    if checkpoint in SHIPPED and not directory.exists():
        return SHIPPED_CHECKPOINTS / checkpoint
    return directory


def _replica(value: dict, file: str, where: str) -> ReplicaConfig:
    backend = value.get("backend", "ember")
    if backend not in BACKENDS:
        raise ConfigError(file, f"{where}.backend", backend, "ember or sglang")
    url = value.get("url")
    if url is not None and (not isinstance(url, str) or not _URL.match(url)):
        raise ConfigError(file, f"{where}.url", url, "an http:// or https:// base URL")
    device = value.get("device", "cuda" if backend == "sglang" else "cpu")
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ConfigError(file, f"{where}.device", device, "cpu, cuda, cuda:N or cuda:0,1,...")
    if backend == "ember" and "," in device:
        raise ConfigError(file, f"{where}.device", device, "one device for an ember replica")
    if backend == "sglang" and device == "cpu":
        raise ConfigError(file, f"{where}.device", device, "cuda devices for an sglang replica")
    gpus = len(device.split(":", 1)[1].split(",")) if ":" in device else None
    tp = value.get("tp", gpus or 1)
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= 64:
        raise ConfigError(file, f"{where}.tp", tp, "a tensor-parallel size from 1 to 64")
    if backend == "ember" and tp != 1:
        raise ConfigError(file, f"{where}.tp", tp, "1 for an ember replica (use backend: sglang)")
    kv = _opt_choice(
        value, "kv_cache_dtype", EMBER_KV_DTYPES if backend == "ember" else SGLANG_KV_DTYPES
    )
    if kv is _BAD:
        allowed = EMBER_KV_DTYPES if backend == "ember" else SGLANG_KV_DTYPES
        raise ConfigError(
            file, f"{where}.kv_cache_dtype", value["kv_cache_dtype"], ", ".join(allowed)
        )
    quant = value.get("quantization")
    if quant is not None:
        ok = quant in EMBER_QUANTIZATIONS if backend == "ember" else isinstance(quant, str)
        if not ok or not quant:
            expected = (
                ", ".join(EMBER_QUANTIZATIONS)
                if backend == "ember"
                else "an SGLang --quantization value"
            )
            raise ConfigError(file, f"{where}.quantization", quant, expected)
    running = value.get("max_running_requests")
    if running is not None and (
        isinstance(running, bool) or not isinstance(running, int) or not 1 <= running <= 100_000
    ):
        raise ConfigError(file, f"{where}.max_running_requests", running, "1 to 100000")
    args = value.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise ConfigError(file, f"{where}.args", args, "a list of command-line arguments")
    args, running = slots_from_args([str(a) for a in args], running, file, where)
    env = value.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int | float) for k, v in env.items()
    ):
        raise ConfigError(file, f"{where}.env", env, "a mapping of variable names to strings")
    for name in ("served_model_name", "model_path"):
        text = value.get(name)
        if text is not None and (not isinstance(text, str) or not text):
            raise ConfigError(file, f"{where}.{name}", text, "a non-empty string")
    return ReplicaConfig(
        backend=backend,
        device=device,
        url=url.rstrip("/") if url else None,
        tp=tp,
        kv_cache_dtype=kv,  # type: ignore[arg-type]
        quantization=quant,
        max_running_requests=running,
        args=tuple(args),
        env=MappingProxyType({k: str(v) for k, v in env.items()}),
        served_model_name=value.get("served_model_name"),
        model_path=value.get("model_path"),
        file=file,
        key=where,
    )


_BAD = object()


def _opt_choice(value: dict, key: str, choices: tuple[str, ...]) -> object:
    item = value.get(key)
    if item is None:
        return None
    return item if item in choices else _BAD


def _one_of(keys: frozenset[str] | set[str]) -> str:
    return "one of " + ", ".join(sorted(keys))
