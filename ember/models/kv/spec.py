"""What the KV cache stores per token, in which dtype, and how many tokens a byte budget holds.

Torch-free, so the scheduler, the model server's flag parsing and ``ember models inspect`` can do
the arithmetic without importing torch.

Capacity follows SGLang's ``ModelRunner.profile_max_num_token``::

    cell_size = bytes cached per token across all layers (for the KV dtype)
    max_total_num_tokens = budget // cell_size, rounded down to whole pages

FP8 scales are static, one float32 per (layer, component). As SGLang keeps ``k_scale`` and
``v_scale`` with the model's weights (they are loaded before the free memory that becomes the KV
budget is measured), they are reported but not charged to the KV budget; they are never per-token
bytes (the 656-vs-576 B lesson in serving.md §2.5: SGLang's DSA FP8 layout carries per-token group
scales and so holds only 1.76x the BF16 tokens, not 2x).
One extra page, always zero, backs the padding of batched gathers (SGLang likewise allocates
``size + page_size``); it is reported separately and not counted in the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ember.errors import ConfigError

KVCacheDtype = Literal["float32", "bf16", "fp8_e4m3", "fp8_e5m2"]
# Spellings accepted on the command line (SGLang's plus our own), mapped to the canonical name.
KV_DTYPE_ALIASES: dict[str, KVCacheDtype] = {
    "float32": "float32",
    "fp32": "float32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8_e4m3",
    "fp8": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
ELEMENT_BYTES: dict[KVCacheDtype, int] = {"float32": 4, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
SCALE_BYTES = 4  # one float32 per (layer, component) for FP8


def parse_kv_dtype(value: str, model_dtype: KVCacheDtype = "bf16") -> KVCacheDtype:
    """Resolve a ``--kv-cache-dtype`` value; ``auto`` means the model's own dtype."""
    if value == "auto":
        return model_dtype
    try:
        return KV_DTYPE_ALIASES[value]
    except KeyError:
        expected = "one of auto, " + ", ".join(sorted(KV_DTYPE_ALIASES))
        raise ConfigError("engine", "kv_cache_dtype", value, expected) from None


@dataclass(frozen=True, slots=True)
class KVSpec:
    """The per-token cache layout of one model.

    ``kind="gqa"``: each layer caches K (``num_kv_heads * head_dim``) and V
    (``num_kv_heads * v_head_dim``). ``kind="mla"``: each layer caches the latent
    (``kv_lora_rank``) and the shared rotary key (``qk_rope_head_dim``), never per-head keys.
    ``index_head_dim > 0`` adds the DSA indexer key on the layers in ``index_layers`` (GLM-5.x;
    all layers when left empty). Layers that reuse an earlier layer's selection ("shared" in
    ``indexer_types``, GLM-5.2's IndexShare) cache no indexer key.
    """

    kind: Literal["gqa", "mla"]
    num_layers: int
    dtype: KVCacheDtype
    num_kv_heads: int = 0
    head_dim: int = 0
    v_head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    index_head_dim: int = 0
    index_layers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.index_head_dim and not self.index_layers:
            object.__setattr__(self, "index_layers", tuple(range(self.num_layers)))
        if not self.index_head_dim:
            object.__setattr__(self, "index_layers", ())
        if self.dtype not in ELEMENT_BYTES:
            raise ConfigError(
                "engine", "kv_cache_dtype", self.dtype, "float32, bf16, fp8_e4m3 or fp8_e5m2"
            )
        if self.num_layers <= 0:
            raise ConfigError("model config", "num_hidden_layers", self.num_layers, "> 0")
        if self.kind == "gqa" and min(self.num_kv_heads, self.head_dim, self.v_head_dim) <= 0:
            raise ConfigError("model config", "num_key_value_heads/head_dim", self, "> 0 for GQA")
        if self.kind == "mla" and min(self.kv_lora_rank, self.qk_rope_head_dim) <= 0:
            raise ConfigError("model config", "kv_lora_rank/qk_rope_head_dim", self, "> 0 for MLA")

    @property
    def is_fp8(self) -> bool:
        """One byte an element with a static scale per (layer, component): e4m3 or e5m2."""
        return self.dtype in ("fp8_e4m3", "fp8_e5m2")

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def width(self) -> int:
        """Elements of the main cache row per token per layer (K|V, or latent|rope)."""
        if self.kind == "gqa":
            return self.num_kv_heads * (self.head_dim + self.v_head_dim)
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def num_components(self) -> int:
        """Scale slots per layer: K and V, or latent and rope, plus the indexer key."""
        return 2 + (1 if self.index_head_dim else 0)

    @property
    def elements_per_token(self) -> int:
        """Cached elements per token across all layers."""
        return self.width * self.num_layers + self.index_head_dim * len(self.index_layers)

    @property
    def cell_size(self) -> int:
        """KV bytes per token across all layers (SGLang's ``cell_size``)."""
        return self.elements_per_token * self.element_bytes

    @property
    def scale_bytes(self) -> int:
        """Fixed bytes of static FP8 scales for the whole pool (zero per token)."""
        if not self.is_fp8:
            return 0
        return (2 * self.num_layers + len(self.index_layers)) * SCALE_BYTES

    def with_dtype(self, dtype: KVCacheDtype) -> KVSpec:
        return KVSpec(
            kind=self.kind,
            num_layers=self.num_layers,
            dtype=dtype,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            v_head_dim=self.v_head_dim,
            kv_lora_rank=self.kv_lora_rank,
            qk_rope_head_dim=self.qk_rope_head_dim,
            index_head_dim=self.index_head_dim,
            index_layers=self.index_layers,
        )


def kv_layout_for(config: Any, dtype: KVCacheDtype = "bf16") -> KVSpec:
    """The cache layout of a parsed checkpoint config (``ember.models.config.ModelConfig``).

    MLA (Kimi, GLM-5.x) caches ``kv_lora_rank + qk_rope_head_dim`` per layer, plus the indexer key
    for DSA; GQA (GLM-4.x) caches K and V for ``num_key_value_heads``. MTP layers are not cached.
    """
    layers = config.num_hidden_layers
    if config.mla is not None:
        indexer = config.indexer
        return KVSpec(
            "mla",
            layers,
            dtype,
            kv_lora_rank=config.mla.kv_lora_rank,
            qk_rope_head_dim=config.mla.qk_rope_head_dim,
            index_head_dim=indexer.index_head_dim if indexer is not None else 0,
            index_layers=tuple(
                i
                for i, kind in enumerate(indexer.indexer_types if indexer else ())
                if kind == "full"
            ),
        )
    gqa = config.gqa
    return KVSpec("gqa", layers, dtype, gqa.num_key_value_heads, gqa.head_dim, gqa.head_dim)


@dataclass(frozen=True, slots=True)
class KVCapacity:
    """How a byte budget turns into pages and tokens."""

    budget_bytes: int
    cell_size: int  # bytes per token, all layers
    scale_bytes: int  # static FP8 scales, kept with the weights: outside the budget
    page_size: int
    num_pages: int  # usable pages (the zero padding page is extra)
    padding_page_bytes: int  # the one always-zero page, outside the budget

    @property
    def max_total_num_tokens(self) -> int:
        return self.num_pages * self.page_size

    @property
    def used_bytes(self) -> int:
        return self.max_total_num_tokens * self.cell_size


def kv_budget_from_fraction(
    total_bytes: int, available_bytes: int, mem_fraction_static: float
) -> int:
    """SGLang's KV byte budget for ``--mem-fraction-static``, measured after loading weights.

    ``rest = available - total * (1 - fraction)``: the fraction of all memory that weights plus
    KV may take, minus what the weights already took (so smaller weights leave more for KV).
    """
    if not 0.0 < mem_fraction_static < 1.0:
        raise ConfigError("engine", "mem_fraction_static", mem_fraction_static, "in (0, 1)")
    rest = available_bytes - int(total_bytes * (1.0 - mem_fraction_static))
    if rest <= 0:
        raise ConfigError(
            "engine",
            "mem_fraction_static",
            mem_fraction_static,
            f"a fraction that leaves room for KV: {available_bytes} of {total_bytes} bytes are "
            f"free, and {1.0 - mem_fraction_static:.2f} of all memory is kept back",
        )
    return rest


def kv_capacity(spec: KVSpec, budget_bytes: int, page_size: int) -> KVCapacity:
    """Tokens (in whole pages) that ``budget_bytes`` of KV cache holds for ``spec``."""
    if page_size <= 0:
        raise ConfigError("engine", "page_size", page_size, "a positive number of tokens")
    max_tokens = budget_bytes // spec.cell_size
    num_pages = max_tokens // page_size
    if num_pages < 1:
        need = spec.cell_size * page_size
        raise ConfigError("engine", "kv_cache_bytes", budget_bytes, f">= {need} (one page)")
    return KVCapacity(
        budget_bytes=budget_bytes,
        cell_size=spec.cell_size,
        scale_bytes=spec.scale_bytes,
        page_size=page_size,
        num_pages=num_pages,
        padding_page_bytes=spec.cell_size * page_size,
    )
