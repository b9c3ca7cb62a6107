"""The training forward: same logits as the reference forward, an indexer loss that trains the
indexer and nothing else, expert balancing, and a training loop that repeats itself exactly."""

from __future__ import annotations

import hashlib

import pytest
import torch

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.training.forward import (
    ExpertLoad,
    dense_indexers,
    indexer_layers,
    lm_loss,
    training_forward,
)
from ember.models.training.trainer import TrainSettings, train
from tests.models import tiny


def _model(arch: str, seed: int = 0):
    torch.manual_seed(seed)
    model = build_model(parse_config(tiny.ALL[arch]()))
    tiny.randomize_(model, seed)
    return model


def _ids(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 97, (batch, seq), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
def test_training_forward_equals_the_reference_forward(arch: str) -> None:
    model = _model(arch)
    ids = _ids(2, 24)
    with torch.no_grad():
        assert torch.equal(training_forward(model, ids).logits, model.reference_forward(ids))


def test_dense_warmup_attends_everywhere_and_restores_the_indexer() -> None:
    model = _model("glmdsa")
    ids = _ids(2, 24)
    saved = [a.indexer.index_topk for a in indexer_layers(model)]
    with torch.no_grad():
        sparse = training_forward(model, ids).logits
        dense = training_forward(model, ids, dense_attention=True).logits
        with dense_indexers(model, 24):
            assert torch.equal(dense, model.reference_forward(ids))
    assert [a.indexer.index_topk for a in indexer_layers(model)] == saved
    assert not torch.equal(sparse, dense)  # index_topk 4 < 24: selection really changes attention


@pytest.mark.parametrize("dense", [True, False])
def test_indexer_loss_trains_only_the_indexer(dense: bool) -> None:
    model = _model("glmdsa")
    out = training_forward(model, _ids(2, 24), dense_attention=dense)
    assert float(out.indexer_kl.detach()) >= 0
    out.indexer_kl.backward()
    for name, p in model.named_parameters():
        touched = p.grad is not None and bool(p.grad.abs().sum() > 0)
        assert touched == (".indexer." in name), name
    model.zero_grad()
    lm_loss(training_forward(model, _ids(2, 24)).logits, _ids(2, 24, 1)).backward()
    assert all(p.grad is None for n, p in model.named_parameters() if ".indexer." in n)


def test_indexer_learns_to_imitate_attention() -> None:
    model = _model("glmdsa")
    params = [p for n, p in model.named_parameters() if ".indexer." in n]
    opt = torch.optim.Adam(params, lr=1e-2)
    ids = _ids(4, 32)
    losses = []
    for _ in range(30):
        kl = training_forward(model, ids, dense_attention=True).indexer_kl
        opt.zero_grad()
        kl.backward()
        opt.step()
        losses.append(float(kl.detach()))
    assert losses[-1] < 0.5 * losses[0]


def test_expert_balancing_moves_bias_away_from_the_busiest_expert() -> None:
    model = _model("kimi")
    load = ExpertLoad(model)
    with torch.no_grad():
        model.reference_forward(_ids(2, 24))
    busiest = [int(c.argmax()) for c in load.counts]
    before = [r.e_score_correction_bias.clone() for r in load.routers]
    assert sum(int(c.sum()) for c in load.counts) == len(load.routers) * 48 * 3  # top-3 of 48
    ratio = load.update_biases(0.1)
    assert ratio > 1
    for router, b, i in zip(load.routers, before, busiest, strict=True):
        assert float(router.e_score_correction_bias[i]) == pytest.approx(float(b[i]) - 0.1)
    assert all(float(c.sum()) == 0 for c in load.counts)
    load.close()


def _run(seed: int) -> tuple[str, list[float]]:
    torch.manual_seed(seed)
    model = build_model(parse_config(tiny.glmdsa()))
    windows = _ids(12, 33, seed)
    settings = TrainSettings(steps=3, batch_size=4, warmup_steps=1, dense_warmup_steps=1, seed=seed)
    report = train(model, windows, settings, log=lambda _: None)
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().numpy().tobytes())
    return digest.hexdigest(), report.losses


def test_training_is_deterministic() -> None:
    first, second = _run(5), _run(5)
    assert first == second
    assert _run(6)[0] != first[0]
