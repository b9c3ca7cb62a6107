"""The same model code on CUDA (float32 and bfloat16) agrees with the CPU float32 reference."""

from __future__ import annotations

import copy

import pytest
import torch

from ember.models.arch import build_model
from ember.models.attention.dense import DenseKVCache
from ember.models.config_parse import parse_config
from tests.models import tiny

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
# bfloat16 rounding may flip a discrete choice (expert or token), so the bfloat16 runs use every
# expert and dense attention; float32 keeps routing and sparse selection.
_ROBUST = {"num_experts_per_tok": 8, "n_group": 1, "topk_group": 1, "index_topk": 64}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("arch", sorted(tiny.ALL))
@torch.no_grad()
def test_cuda_reference_and_cached_forward_match_cpu(arch: str, dtype: torch.dtype) -> None:
    overrides = _ROBUST if dtype == torch.bfloat16 else {}
    cpu = build_model(parse_config(tiny.ALL[arch](**overrides)))
    tiny.randomize_(cpu, 21)
    ids = torch.randint(0, cpu.config.vocab_size, (1, 10))
    expected = cpu.eval().reference_forward(ids)
    cuda = copy.deepcopy(cpu).to("cuda", dtype)
    tolerance = 1e-4 if dtype == torch.float32 else 0.05
    reference = cuda.reference_forward(ids.cuda())
    assert reference.device.type == "cuda" and reference.dtype == dtype
    assert tiny.relative_error(reference.cpu(), expected) < tolerance
    cache = DenseKVCache()
    prefill = cuda(ids[0, :7].cuda(), cache.begin(["a"], [7]))
    decode = [cuda(ids[0, n : n + 1].cuda(), cache.begin(["a"], [1])) for n in range(7, 10)]
    cached = torch.cat([prefill, *decode]).cpu()
    assert tiny.relative_error(cached, expected[0]) < tolerance
