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


def _reference_greedy(model, prompt: list[int], max_tokens: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(max_tokens):
        logits = model.reference_forward(torch.tensor([tokens], device="cuda"))[0, -1]
        tokens.append(int(logits.argmax()))
    return tokens[len(prompt) :]


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
@torch.no_grad()
def test_the_engine_on_cuda_matches_the_reference_greedy_loop(arch: str) -> None:
    """The paged engine with its pool on the GPU (float32): batched greedy decoding with chunked
    prefill and preemption gives the tokens of a full-recompute loop over ``reference_forward``."""
    import random

    from ember.models.engine.config import EngineConfig
    from ember.models.engine.llm_engine import LLMEngine
    from ember.models.engine.sequence import StopCriteria
    from ember.models.kv.spec import kv_layout_for
    from tests.models.engine.test_engine_archs import PREEMPTING

    model = build_model(parse_config(tiny.ALL[arch]()))
    tiny.randomize_(model, 17)
    model = model.eval().to("cuda")
    rng = random.Random(3)
    vocab = model.config.vocab_size
    prompts = [[rng.randrange(vocab) for _ in range(rng.randint(6, 20))] for _ in range(5)]
    config = EngineConfig(**PREEMPTING, integrity="off")
    engine = LLMEngine(model, kv_layout_for(model.config), config, model_dtype="float32")
    assert {c.device.type for c in engine.pool.caches} == {"cuda"}
    got = engine.generate(prompts, StopCriteria(max_tokens=5, ignore_eos=True))
    assert got == [_reference_greedy(model, p, 5) for p in prompts]
    assert engine.stats.preemptions > 0


@pytest.mark.parametrize("kv", ["bf16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("arch", sorted(tiny.ALL))
@torch.no_grad()
def test_the_paged_pool_on_cuda_matches_the_cpu_pool(arch: str, kv: str) -> None:
    """Same float32 model, same batches, a BF16 or FP8 pool on each device: the logits agree.
    Only the summation order differs, which can move a stored value by one step of its format
    (2^-3 relative in FP8): hence the tolerance; wrong tables or masks would be off by ~1."""
    from ember.models.attention.backend import BatchLayout
    from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
    from ember.models.kv.pool import KVPool
    from ember.models.kv.spec import kv_layout_for

    cpu = build_model(parse_config(tiny.ALL[arch]()))
    tiny.randomize_(cpu, 23)
    cpu = cpu.eval()
    cuda = copy.deepcopy(cpu).to("cuda")
    spec = kv_layout_for(cpu.config, kv)
    pools = {d: KVPool(spec, 32, 4, integrity=False, device=d) for d in ("cpu", "cuda")}
    spaces = {d: Workspace(device=d) for d in ("cpu", "cuda")}
    tables: dict[str, list[int]] = {}
    free = list(range(32))
    lengths = {"a": 0, "b": 0, "c": 0}
    torch.manual_seed(1)
    steps = [(["a", "b"], [7, 3]), (["c", "a", "b"], [5, 1, 1]), (["b", "c"], [1, 6])]
    for members, query in steps:
        for seq, q in zip(members, query, strict=True):
            tables.setdefault(seq, [])
            while len(tables[seq]) * 4 < lengths[seq] + q:
                tables[seq].append(free.pop())
        layout = BatchLayout(tuple(query), tuple(lengths[s] for s in members))
        ids = torch.randint(0, cpu.config.vocab_size, (sum(query),))
        out = {}
        for device, model in (("cpu", cpu), ("cuda", cuda)):
            pool = pools[device]
            batch = PagedBatch.build(
                layout, [tables[s] for s in members], 4, pool.padding_page, torch.device(device)
            )
            backend = PagedAttentionBackend(pool, batch, spaces[device])
            out[device] = model(ids.to(device), backend).cpu()
        scale = float(out["cpu"].abs().max())
        # e5m2 keeps one mantissa bit fewer: a rounding flip moves a value twice as far.
        tolerance = {"fp8_e4m3": 0.02, "fp8_e5m2": 0.04}.get(kv, 0.005)
        error = float((out["cuda"] - out["cpu"]).abs().max())
        assert error <= tolerance * scale, (arch, kv, members, error / scale)
        for seq, q in zip(members, query, strict=True):
            lengths[seq] += q


@pytest.mark.parametrize("strategy", ["padded", "sorted"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@torch.no_grad()
def test_grouped_moe_on_cuda_matches_the_per_expert_loop(
    strategy: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both grouped strategies on the GPU (the sorted one is what a long prefill takes: PyTorch's
    grouped matmul in BF16, one slice per expert otherwise) against the plain loop there."""
    from ember.models.layers import moe_grouped
    from tests.models.layers.test_moe_grouped import _moe

    moe = _moe(0, dtype).to("cuda")
    monkeypatch.setattr(moe_grouped, "PADDED_MAX_MEAN_ROWS", 10**9 if strategy == "padded" else 0)
    x = torch.randn(2, 300, 64).to("cuda", dtype)
    want, got = moe.forward_reference(x), moe(x)
    assert moe._stacked is not None and got.device.type == "cuda"
    scale = float(want.abs().max())
    tolerance = 1e-4 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance * scale)
