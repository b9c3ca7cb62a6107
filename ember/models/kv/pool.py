"""The paged KV pool: preallocated storage for every layer's cache entries, addressed by slot.

Slot ``s`` is offset ``s % page_size`` of page ``s // page_size``. Pages ``0 .. num_pages-1`` are
handed out by the block manager; page ``num_pages`` is the *padding page*: always zero, never
allocated, the target of every padded position in a batched gather (zeros keep masked positions
finite: 0 * 0, never NaN).

Every cache tensor has the same five axes, ``(layers, heads, pages, page_size, width)``, so one
head of one layer is a contiguous ``(pages, page_size * width)`` matrix: a gather of whole pages is
a row copy, and yields contiguous ``(B, L, width)`` operands for ``bmm``:

- MLA (Kimi, GLM-5.x): ``kv`` = ``(L, 1, N, S, C + R)``, the latent and the rotary key;
- GQA (GLM-4.x): ``k`` = ``(L, Hkv, N, S, D)`` and ``v`` = ``(L, Hkv, N, S, Dv)``;
- DSA indexer (GLM-5.x): ``index_k`` = ``(Li, 1, N, S, Di)``, one row per layer that runs its own
  indexer (``index_row[layer]``).

The element type is float32, bfloat16, float8_e4m3fn or float8_e5m2; FP8 carries one static
float32 scale per (layer, component) (see ``fp8.py``). Components: 0 = K or latent, 1 = V or
rope, 2 = indexer key.
"""

from __future__ import annotations

import torch

from ember.models.kv.fp8 import FP8_DTYPES, quantize_fp8
from ember.models.kv.integrity import KVSidecar
from ember.models.kv.spec import KVSpec

STORAGE_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    **FP8_DTYPES,
}


class KVPool:
    """Owns the cache tensors, their FP8 scales and (when integrity is on) the sidecar."""

    def __init__(
        self,
        spec: KVSpec,
        num_pages: int,
        page_size: int,
        *,
        integrity: bool = True,
        device: torch.device | str = "cpu",
    ) -> None:
        self.spec = spec
        self.num_pages = num_pages
        self.page_size = page_size
        self.padding_page = num_pages
        self.num_slots = (num_pages + 1) * page_size
        self.dtype = STORAGE_DTYPES[spec.dtype]
        self.is_fp8 = spec.is_fp8
        self.device = torch.device(device)
        layers, pages = spec.num_layers, num_pages + 1

        def cache(num_layers: int, heads: int, width: int) -> torch.Tensor:
            shape = (num_layers, heads, pages, page_size, width)
            return torch.zeros(shape, dtype=self.dtype, device=self.device)

        self.kv: torch.Tensor | None = None
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        if spec.kind == "mla":
            self.kv = cache(layers, 1, spec.width)
        else:
            self.k = cache(layers, spec.num_kv_heads, spec.head_dim)
            self.v = cache(layers, spec.num_kv_heads, spec.v_head_dim)
        self.index_k: torch.Tensor | None = None
        # Layer -> row of ``index_k``: only layers with their own indexer cache keys.
        self.index_row = {layer: row for row, layer in enumerate(spec.index_layers)}
        if spec.index_layers:
            self.index_k = cache(len(spec.index_layers), 1, spec.index_head_dim)
        # Python floats: folded into queries and outputs without a tensor op per layer.
        self.scales = [[1.0] * spec.num_components for _ in range(spec.num_layers)]
        self.sidecar: KVSidecar | None = None
        if integrity:
            if self.device.type != "cpu":
                raise NotImplementedError("the integrity sidecar reads host memory (CPU pools)")
            views = [c.view(torch.uint8).numpy() for c in self.caches]
            self.sidecar = KVSidecar(views, page_size)

    @property
    def caches(self) -> list[torch.Tensor]:
        """Every cache tensor, each ``(layers, heads, pages, page_size, width)``."""
        return [c for c in (self.kv, self.k, self.v, self.index_k) if c is not None]

    @property
    def padding_slot(self) -> int:
        return self.padding_page * self.page_size

    @property
    def nbytes(self) -> int:
        """Bytes of cache storage, padding page included."""
        return sum(c.numel() * c.element_size() for c in self.caches)

    def set_scales(self, scales: list[list[float]]) -> None:
        """Install static FP8 scales, one per (layer, component); before anything is cached."""
        spec = self.spec
        if len(scales) != spec.num_layers or any(len(s) != spec.num_components for s in scales):
            raise ValueError(f"expected {spec.num_layers} x {spec.num_components} scales")
        if not all(value > 0 for row in scales for value in row):
            raise ValueError("FP8 scales must be positive")
        self.scales = [list(map(float, row)) for row in scales]

    def encode(self, x: torch.Tensor, layer: int, component: int) -> torch.Tensor:
        """Convert new cache entries to the storage dtype (quantizing FP8 with its scale)."""
        if self.is_fp8:
            return quantize_fp8(x, self.scales[layer][component], self.dtype)
        return x.to(self.dtype)

    def slot_bytes(self, cache: torch.Tensor, row: int, slot: int) -> torch.Tensor:
        """The raw bytes of one slot of one layer row of ``cache``: ``(heads, width_bytes)``."""
        page, offset = divmod(slot, self.page_size)
        return cache.view(torch.uint8)[row, :, page, offset]

    def zero_pages(self, pages: list[int]) -> None:
        """Clear freshly allocated pages so stale bytes never meet a padded gather or a digest."""
        if not pages:
            return
        index = torch.tensor(pages, dtype=torch.int64, device=self.device)
        for cache in self.caches:
            cache[:, :, index] = 0
        if self.sidecar is not None:
            size = self.page_size
            slots = (index[:, None] * size + torch.arange(size)).flatten()
            self.sidecar.clear(slots.numpy())
