"""The paged backend keeps every tensor on its pool's device (CUDA on a GPU machine).

This machine has no accelerator, so PyTorch's ``meta`` device stands in: it computes nothing, but
an op that mixes a host tensor with a ``meta`` one raises, as it would with a CUDA one. Every
step's tables must follow the pool, every output must be created there, and the native (host)
kernels must stay out of the way. ``scripts/gpu-check.sh`` runs the real thing on a GPU.
"""

from __future__ import annotations

import pytest
import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec

META = torch.device("meta")
PAGE = 4


def _spec(kind: str, dtype: str) -> KVSpec:
    if kind == "gqa":
        return KVSpec("gqa", 2, dtype, num_kv_heads=2, head_dim=8, v_head_dim=6)
    if kind == "gqa-sdpa":
        return KVSpec("gqa", 2, dtype, num_kv_heads=2, head_dim=8, v_head_dim=8)
    return KVSpec(
        "mla", 2, dtype, kv_lora_rank=12, qk_rope_head_dim=4, index_head_dim=8 * (kind == "dsa")
    )


def test_a_batch_built_for_a_device_holds_every_table_there() -> None:
    # Two decodes and one prefill chunk: both groups, contiguous and scattered rows.
    layout = BatchLayout((1, 5, 1), (7, 0, 3))
    batch = PagedBatch.build(layout, [[3, 4], [0, 1], [2]], PAGE, 9, META)
    tensors = [batch.slot_mapping, batch.slot_pages, batch.slot_offsets]
    for group in batch.groups:
        tensors += [group.pages, group.allowed, group.seq_lens, group.bias(torch.float32)]
        tensors += [group.slots(), group.head_pages(2, 10, True), group.head_pages(2, 10, False)]
        tensors += [t for t in (group.token_index, group.valid_rows, group.valid) if t is not None]
    assert {t.device for t in tensors} == {META}
    host = PagedBatch.build(layout, [[3, 4], [0, 1], [2]], PAGE, 9)
    assert host.slot_mapping.device.type == "cpu"  # no device: the host, as before


def test_a_device_workspace_takes_no_native_kernel_and_allocates_there() -> None:
    workspace = Workspace(device=META)
    assert workspace.decode_kernel is None and workspace.store_kernel is None
    assert workspace.take((4, 4), torch.bfloat16, "raw").device == META


@pytest.mark.parametrize("kind", ["gqa", "gqa-sdpa", "mla", "dsa"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3", "fp8_e5m2"])
def test_attention_runs_on_the_pool_device(kind: str, dtype: str) -> None:
    # Boolean masks (a prefill group's valid rows) need nonzero(), which meta cannot size.
    from torch.fx.experimental import _config

    with _config.patch(meta_nonzero_assume_all_nonzero=True):
        _attend_on_meta(kind, dtype)


def _attend_on_meta(kind: str, dtype: str) -> None:
    spec = _spec(kind, dtype)
    pool = KVPool(spec, num_pages=16, page_size=PAGE, integrity=False, device=META)
    pool.zero_pages([0, 1, 2])
    layout = BatchLayout((1, 6, 1), (9, 0, 2))
    tables = [[3, 4, 5], [0, 1], [2]]
    batch = PagedBatch.build(layout, tables, PAGE, pool.padding_page, META)
    backend = PagedAttentionBackend(pool, batch, Workspace(device=META))
    t = layout.num_tokens

    def rand(*shape: int) -> torch.Tensor:
        return torch.empty(*shape, dtype=torch.bfloat16, device=META)

    for layer in range(spec.num_layers):
        if kind.startswith("gqa"):
            out = backend.gqa(layer, rand(t, 4, 8), rand(t, 2, 8), rand(t, 2, spec.v_head_dim), 0.3)
            assert out.shape == (t, 4, spec.v_head_dim)
        else:
            topk = None
            if kind == "dsa":  # a top-k smaller than the contexts: the selection path runs
                topk = backend.indexer_topk(layer, rand(t, 2, 8), rand(t, 2), rand(t, 8), 0.5, 4)
                assert topk is not None and topk.device == META
            out = backend.mla(layer, rand(t, 3, 12), rand(t, 3, 4), rand(t, 12), rand(t, 4), 0.3,
                              topk)  # fmt: skip
            assert out.shape == (t, 3, 12)
        assert out.device == META
