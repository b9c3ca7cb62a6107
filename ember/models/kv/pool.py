"""The paged KV pool: preallocated storage for every layer's cache entries, addressed by slot.

Slot ``s`` belongs to page ``s // page_size``. Pages ``0 .. num_pages-1`` are handed out by the
block manager; page ``num_pages`` is the *padding page*: always zero, never allocated, the target of
every padded position in a batched gather (zeros keep masked positions finite: 0 * 0, never NaN).

Storage is layer-major so one layer's gather reads contiguous rows:

- ``kv``: ``(L, N, W)`` with ``W`` = ``Hkv*D | Hkv*Dv`` (GQA) or ``C | R`` (MLA);
- ``index_k``: ``(L, N, Di)`` for the DSA indexer (GLM-5.x), else ``None``.

The element type is float32, bfloat16 or float8_e4m3fn; FP8 carries one static float32 scale per
(layer, component) (see ``fp8.py``). Components: 0 = K or latent, 1 = V or rope, 2 = indexer key.
"""

from __future__ import annotations

import torch

from ember.models.kv.fp8 import FP8_DTYPE
from ember.models.kv.integrity import KVSidecar
from ember.models.kv.spec import KVSpec

STORAGE_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "fp8_e4m3": FP8_DTYPE,
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
        self.is_fp8 = spec.dtype == "fp8_e4m3"
        self.device = torch.device(device)
        shape = (spec.num_layers, self.num_slots, spec.width)
        self.kv = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.index_k: torch.Tensor | None = None
        if spec.index_head_dim:
            index_shape = (spec.num_layers, self.num_slots, spec.index_head_dim)
            self.index_k = torch.zeros(index_shape, dtype=self.dtype, device=self.device)
        # Python floats: folded into queries and outputs without a tensor op per layer.
        self.scales = [[1.0] * spec.num_components for _ in range(spec.num_layers)]
        self.sidecar: KVSidecar | None = None
        if integrity:
            if self.device.type != "cpu":
                raise NotImplementedError("the integrity sidecar reads host memory (CPU pools)")
            views = [self.kv.view(torch.uint8).numpy()]
            if self.index_k is not None:
                views.append(self.index_k.view(torch.uint8).numpy())
            self.sidecar = KVSidecar(views, self.num_slots)

    @property
    def padding_slot(self) -> int:
        return self.padding_page * self.page_size

    @property
    def nbytes(self) -> int:
        """Bytes of cache storage, padding page included."""
        total = self.kv.numel() * self.kv.element_size()
        if self.index_k is not None:
            total += self.index_k.numel() * self.index_k.element_size()
        return total

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
            scale = self.scales[layer][component]
            if scale != 1.0:
                x = x.float() / scale
        return x.to(self.dtype)

    def zero_pages(self, pages: list[int]) -> None:
        """Clear freshly allocated pages so stale bytes never meet a padded gather or a digest."""
        if not pages:
            return
        size = self.page_size
        slots = torch.tensor(pages, dtype=torch.int64)[:, None] * size + torch.arange(size)
        slots = slots.flatten()
        self.kv[:, slots] = 0
        if self.index_k is not None:
            self.index_k[:, slots] = 0
        if self.sidecar is not None:
            self.sidecar.clear(slots.numpy())

    def slots_of_page(self, page: int) -> range:
        return range(page * self.page_size, (page + 1) * self.page_size)
