"""The engine on the real architectures (Kimi, GLM-4.x, GLM-5.x tiny random configs, float32).

Batched greedy decoding with chunked prefill, mixed steps and preemption forced by a small pool
must give exactly the tokens of a single-sequence full-recompute loop over ``reference_forward``
(no cache, naive attention). Also: the paged backend against the dense reference backend on fresh
random inputs through the real attention layers, in float32, BF16 and FP8 KV.
"""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.attention.paged import PagedAttentionBackend, PagedBatch
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.fp8 import dequantize_fp8, quantize_fp8
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import kv_layout_for

# The architectures live on their own branch until it is merged; until then these tests skip.
arch = pytest.importorskip("ember.models.arch")
config_parse = pytest.importorskip("ember.models.config_parse")
dense = pytest.importorskip("ember.models.attention.dense")
tiny = pytest.importorskip("tests.models.tiny")


# A pool too small for five prompts of up to 20 tokens plus 5 new ones: chunked prefill, mixed
# steps and preemption all happen (the CUDA tests reuse it).
PREEMPTING = dict(
    max_total_tokens=40,  # 10 pages of 4 for 5 sequences of up to 25 tokens
    page_size=4,
    max_num_seqs=4,
    max_num_batched_tokens=12,
    # Reserve no growth, so that admission over-commits and the pool runs out: preemption.
    init_new_token_ratio=0.0,
    min_new_token_ratio=0.0,
)


def _model(name: str, seed: int):
    config = config_parse.parse_config(tiny.ALL[name](), source=f"tiny:{name}")
    model = arch.build_model(config, dtype=torch.float32).eval()
    tiny.randomize_(model, seed)
    return model, config


def _reference_greedy(model, prompt: list[int], max_tokens: int) -> list[int]:
    tokens = list(prompt)
    with torch.inference_mode():
        for _ in range(max_tokens):
            logits = model.reference_forward(torch.tensor([tokens]))[0, -1]
            tokens.append(int(logits.argmax()))
    return tokens[len(prompt) :]


@pytest.mark.parametrize("name", ["kimi", "glm4", "glmdsa"])
def test_engine_matches_reference_forward(name: str) -> None:
    model, config = _model(name, seed=17)
    rng = random.Random(3)
    prompts = [
        [rng.randrange(config.vocab_size) for _ in range(rng.randint(6, 20))] for _ in range(5)
    ]
    engine_config = EngineConfig(**PREEMPTING, integrity="full")
    engine = LLMEngine(model, kv_layout_for(config), engine_config, model_dtype="float32")
    got = engine.generate(prompts, StopCriteria(max_tokens=5, ignore_eos=True))
    want = [_reference_greedy(model, prompt, 5) for prompt in prompts]
    assert got == want
    assert engine.stats.preemptions > 0
    assert engine.stats.integrity_failures == 0


class _Rounding:
    """The dense reference backend fed cache entries rounded as the paged pool stores them.

    (MoE routing is discontinuous, so comparing a BF16/FP8 cache with a float32 one end to end
    says little; rounding the reference's inputs the same way isolates the paged backend.)
    """

    def __init__(self, dense, kv: str) -> None:
        self.dense, self.kv = dense, kv

    @property
    def layout(self):
        return self.dense.layout

    def _round(self, x: torch.Tensor) -> torch.Tensor:
        if self.kv == "bf16":
            return x.to(torch.bfloat16).to(x.dtype)
        if self.kv == "fp8_e4m3":
            return dequantize_fp8(quantize_fp8(x, 1.0), 1.0, x.dtype)
        return x

    def gqa(self, layer, q, k, v, scale):
        return self.dense.gqa(layer, q, self._round(k), self._round(v), scale)

    def mla(self, layer, q_latent, q_rope, latent, k_rope, scale, topk=None):
        latent, k_rope = self._round(latent), self._round(k_rope)
        return self.dense.mla(layer, q_latent, q_rope, latent, k_rope, scale, topk)

    def indexer_topk(self, layer, index_q, index_weights, index_k, scale, topk):
        return self.dense.indexer_topk(
            layer, index_q, index_weights, self._round(index_k), scale, topk
        )


@pytest.mark.parametrize("name", ["kimi", "glm4", "glmdsa"])
@pytest.mark.parametrize("kv", ["float32", "bf16", "fp8_e4m3"])
def test_paged_backend_matches_dense_backend_in_the_real_layers(name: str, kv: str) -> None:
    """Same model, same batches: logits through the paged pool vs the dense reference cache
    (whose inputs are rounded to ``kv`` exactly as the pool rounds them)."""
    model, config = _model(name, seed=23)
    torch.manual_seed(1)
    pool = KVPool(kv_layout_for(config, kv), num_pages=32, page_size=4, integrity=False)
    dense_cache = dense.DenseKVCache()
    tables: dict[str, list[int]] = {}
    free = list(range(32))
    random.Random(2).shuffle(free)
    lengths = {"a": 0, "b": 0, "c": 0}
    for members, query in [
        (["a", "b"], [7, 3]),
        (["c", "a", "b"], [5, 1, 1]),
        (["b", "c"], [1, 6]),
    ]:
        ids = torch.randint(0, config.vocab_size, (sum(query),))
        for seq, q in zip(members, query, strict=True):
            tables.setdefault(seq, [])
            while len(tables[seq]) * 4 < lengths[seq] + q:
                tables[seq].append(free.pop())
        dense_backend = dense_cache.begin(members, query)
        batch = PagedBatch.build(
            dense_backend.layout, [tables[s] for s in members], 4, pool.padding_page
        )
        with torch.inference_mode():
            want = model(ids, _Rounding(dense_backend, kv))
            got = model(ids, PagedAttentionBackend(pool, batch))
        scale = float(want.abs().max())
        assert float((got - want).abs().max()) <= 1e-4 * scale, (name, kv, members)
        for seq, q in zip(members, query, strict=True):
            lengths[seq] += q


def test_the_engine_puts_its_pool_where_the_model_is_and_refuses_integrity_off_the_host() -> None:
    """A model on an accelerator (``meta`` stands in here) gets its KV pool there; the integrity
    checker, which reads host memory, is refused with the setting named."""
    from ember.errors import ConfigError

    model, config = _model("glm4", seed=0)
    model = model.to("meta")
    settings = dict(max_total_tokens=64, page_size=4, max_num_seqs=2, max_num_batched_tokens=16)
    engine = LLMEngine(model, kv_layout_for(config), EngineConfig(**settings, integrity="off"))
    assert {c.device.type for c in engine.pool.caches} == {"meta"}
    assert engine.runner.workspace.decode_kernel is None  # host kernels stay out
    with pytest.raises(ConfigError, match="integrity.*CPU pools only"):
        LLMEngine(model, kv_layout_for(config), EngineConfig(**settings, integrity="sampled"))
