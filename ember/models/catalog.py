"""Model ids (as Workers AI names them) -> architecture, checkpoint directory and metadata.

Every Kimi id runs the shipped DeepseekV3 checkpoint, ``glm-4.7-flash`` the Glm4Moe one and the
GLM-5.x ids the GlmMoeDsa one; each entry carries its Workers AI context window. ``ember.yaml`` can
point any id (known or new) at a real checkpoint directory with ``with_overrides``.

Torch-free: the runtime lists and validates models without importing the engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from ember.errors import CheckpointError, ConfigError, ModelNotFound
from ember.models.config import DEEPSEEK_V3, GLM4_MOE, GLM_MOE_DSA, ModelConfig
from ember.models.config_parse import load_config

PACKAGE_DIR = Path(__file__).resolve().parent
SHIPPED_CHECKPOINTS = PACKAGE_DIR / "checkpoints"
REFERENCE_CONFIGS = PACKAGE_DIR / "configs"
# shipped checkpoint name -> architecture it must have
SHIPPED: Mapping[str, str] = MappingProxyType(
    {"kimi-tiny": DEEPSEEK_V3, "glm4moe-tiny": GLM4_MOE, "glmdsa-tiny": GLM_MOE_DSA}
)


class CheckpointNotBuilt(CheckpointError):
    """A catalog id maps to a shipped checkpoint that has not been trained into the package yet."""


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """Per-model serving options an ``ember.yaml`` override may set (None: engine default)."""

    dtype: str | None = None  # "float32", "bfloat16"
    quantization: str | None = None  # weight scheme name, interpreted by the quantization module
    kv_cache_dtype: str | None = None  # e.g. "auto", "bf16", "fp8_e4m3"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    model_id: str
    family: Literal["kimi", "glm"]
    architecture: str
    checkpoint_dir: Path
    context_window: int  # Workers AI's, in tokens
    function_calling: bool = False
    reasoning: bool = False
    vision: bool = False  # the platform model's; ember's engine reads text only
    # The platform's catalog marks reasoning mandatory (``reasoning_effort.mandatory``): the
    # model thinks whatever reasoning_effort says ("none" reads as its default effort).
    thinking_mandatory: bool = False
    # The platform catalog's ``async_queue`` (batches with ``queueRequest``): None where its
    # file does not say, and ember queues them.
    async_queue: bool | None = None
    shipped: str | None = None  # the shipped checkpoint's name; None when overridden
    reference_config: str | None = None  # config-only full-size entry of the same architecture
    options: ModelOptions = field(default_factory=ModelOptions)

    @property
    def is_built(self) -> bool:
        return (self.checkpoint_dir / "config.json").is_file()


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A catalog entry whose checkpoint exists and whose config parsed."""

    entry: CatalogEntry
    config: ModelConfig

    @property
    def max_context(self) -> int:
        """Tokens a request may use: the id's window, capped by what the checkpoint supports."""
        return min(self.entry.context_window, self.config.max_position_embeddings)


@dataclass(frozen=True, slots=True)
class ModelOverride:
    """``ember.yaml``: serve ``model_id`` from ``path`` (a checkpoint directory)."""

    path: Path
    context_window: int | None = None  # default: the id's, or the checkpoint's max positions
    options: ModelOptions = field(default_factory=ModelOptions)


class Catalog:
    """An immutable id -> entry mapping."""

    def __init__(self, entries: list[CatalogEntry]) -> None:
        self._entries = {entry.model_id: entry for entry in entries}

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self._entries.values())

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def ids(self) -> list[str]:
        return list(self._entries)

    def get(self, model_id: str) -> CatalogEntry:
        entry = self._entries.get(model_id)
        if entry is None:
            known = ", ".join(self._entries)
            raise ModelNotFound(f"unknown model {model_id!r}; known models: {known}")
        return entry

    def resolve(self, model_id: str) -> ResolvedModel:
        """The entry and its parsed config; a missing shipped checkpoint says it is not built."""
        entry = self.get(model_id)
        if entry.shipped is not None and not entry.is_built:
            raise CheckpointNotBuilt(
                f"{model_id} runs the shipped checkpoint {entry.shipped!r}, which is not built yet "
                f"(expected {entry.checkpoint_dir / 'config.json'}; the training script in "
                "ember/models/training writes it)"
            )
        return ResolvedModel(entry, load_config(entry.checkpoint_dir))


def _kimi(
    model_id: str,
    window: int,
    *,
    thinking_mandatory: bool = False,
    async_queue: bool | None = None,
) -> CatalogEntry:
    return CatalogEntry(
        model_id,
        "kimi",
        DEEPSEEK_V3,
        SHIPPED_CHECKPOINTS / "kimi-tiny",
        window,
        function_calling=True,
        reasoning=True,
        vision=True,
        thinking_mandatory=thinking_mandatory,
        async_queue=async_queue,
        shipped="kimi-tiny",
        reference_config="kimi-k2.5",
    )


def _glm5(model_id: str, window: int, *, vision: bool = False, thinking_mandatory: bool = False):
    return CatalogEntry(
        model_id,
        "glm",
        GLM_MOE_DSA,
        SHIPPED_CHECKPOINTS / "glmdsa-tiny",
        window,
        function_calling=True,
        reasoning=True,
        vision=vision,
        thinking_mandatory=thinking_mandatory,
        shipped="glmdsa-tiny",
        reference_config="glm-5.2",
    )


def default_catalog() -> Catalog:
    """The Workers AI Kimi and GLM ids (context windows from the Workers AI model catalog)."""
    return Catalog(
        [
            _kimi("@cf/moonshotai/kimi-k2.5", 256_000, async_queue=False),
            _kimi("@cf/moonshotai/kimi-k2.6", 262_144, async_queue=True),
            _kimi("@cf/moonshotai/kimi-k2.7-code", 262_144, thinking_mandatory=True),
            CatalogEntry(
                "@cf/zai-org/glm-4.7-flash",
                "glm",
                GLM4_MOE,
                SHIPPED_CHECKPOINTS / "glm4moe-tiny",
                131_072,
                function_calling=True,
                reasoning=True,
                shipped="glm4moe-tiny",
                reference_config="glm-4.7",
            ),
            _glm5("@cf/zai-org/glm-5.2", 262_144),
            _glm5("@cf/zai-org/glm-5.3", 1_310_720),
            # The platform's catalog file lists function_calling true for GLM-5.3-Flash.
            _glm5("@cf/zai-org/glm-5.3-flash", 1_310_720, vision=True, thinking_mandatory=True),
        ]
    )


def with_overrides(
    overrides: Mapping[str, str | os.PathLike[str] | ModelOverride], base: Catalog | None = None
) -> Catalog:
    """``base`` (default: ``default_catalog()``) with ids pointed at checkpoint directories.

    Each directory's config.json is read now, so a bad path fails at startup, naming the id.
    A new id takes its family from the checkpoint's architecture and its context window from
    ``ModelOverride.context_window`` or the checkpoint's ``max_position_embeddings``.
    """
    catalog = base if base is not None else default_catalog()
    entries = {entry.model_id: entry for entry in catalog}
    for model_id, value in overrides.items():
        spec = value if isinstance(value, ModelOverride) else ModelOverride(Path(value))
        directory = Path(spec.path).expanduser()
        if spec.context_window is not None and spec.context_window < 1:
            raise ConfigError("<model overrides>", model_id, spec.context_window, "a window >= 1")
        try:
            config = load_config(directory)
        except ConfigError as exc:
            hint = f"the checkpoint of model {model_id!r}"
            raise ConfigError(exc.file, exc.key, exc.found, exc.expected, hint=hint) from exc
        except CheckpointError as exc:
            raise CheckpointError(f"model {model_id!r}: {exc}") from exc
        old = entries.get(model_id)
        family: Literal["kimi", "glm"] = "kimi" if config.architecture == DEEPSEEK_V3 else "glm"
        window = spec.context_window or (
            old.context_window if old is not None else config.max_position_embeddings
        )
        base_entry = old or CatalogEntry(model_id, family, config.architecture, directory, window)
        entries[model_id] = replace(
            base_entry,
            family=family,
            architecture=config.architecture,
            checkpoint_dir=directory,
            context_window=window,
            shipped=None,
            options=spec.options,
        )
    return Catalog(list(entries.values()))


def reference_configs() -> dict[str, Path]:
    """Config-only full-size entries (no weights): name -> config.json."""
    return {path.parent.name: path for path in sorted(REFERENCE_CONFIGS.glob("*/config.json"))}
