"""The training loop: deterministic (fixed seeds, thread count, data order), CPU-friendly.

AdamW with linear warm-up and cosine decay; gradient clipping; DeepSeek-V3's auxiliary-loss-free
expert balancing (``ExpertLoad``); for DSA models a dense warm-up, then sparse attention, with the
indexer trained by its KL loss throughout. Wall time and process CPU time (all threads) are
measured and reported, never estimated.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ember.models.arch import CausalLM
from ember.models.training.data import batches
from ember.models.training.forward import ExpertLoad, lm_loss, training_forward


@dataclass(frozen=True, slots=True)
class TrainSettings:
    steps: int
    batch_size: int = 8
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 30
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    bias_update_rate: float = 5e-3  # DeepSeek-V3 uses 1e-3 over far more steps
    dense_warmup_steps: int = 0  # DSA only: steps with dense attention before going sparse
    threads: int = 2
    seed: int = 0
    log_every: int = 10


@dataclass
class TrainReport:
    steps: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    losses: list[float] = field(default_factory=list)
    indexer_kls: list[float] = field(default_factory=list)
    max_expert_load: list[float] = field(default_factory=list)

    def final_loss(self, last: int = 20) -> float:
        tail = self.losses[-last:]
        return sum(tail) / len(tail)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def make_deterministic(threads: int, seed: int) -> None:
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)


def learning_rate(step: int, s: TrainSettings) -> float:
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * cosine)


def _optimizer(model: CausalLM, s: TrainSettings) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": s.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=s.lr, betas=s.betas, eps=1e-8, foreach=False)


def train(
    model: CausalLM,
    windows: torch.Tensor,
    settings: TrainSettings,
    log: Callable[[str], None] = print,
) -> TrainReport:
    """Train ``model`` in place on (N, seq_len + 1) ``windows``; returns measured figures."""
    model.train()
    optimizer = _optimizer(model, settings)
    load = ExpertLoad(model)
    report = TrainReport()
    stream = batches(windows, settings.batch_size, settings.seed)
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    try:
        for step in range(settings.steps):
            batch = next(stream)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, settings)
            dense = step < settings.dense_warmup_steps
            out = training_forward(model, batch[:, :-1], dense_attention=dense)
            loss = lm_loss(out.logits, batch[:, 1:])
            optimizer.zero_grad(set_to_none=True)
            (loss + out.indexer_kl).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
            optimizer.step()
            report.max_expert_load.append(load.update_biases(settings.bias_update_rate))
            report.losses.append(float(loss.detach()))
            report.indexer_kls.append(float(out.indexer_kl.detach()))
            report.steps = step + 1
            report.tokens += batch[:, 1:].numel()
            if (step + 1) % settings.log_every == 0 or step + 1 == settings.steps:
                wall = time.perf_counter() - wall0
                recent = report.final_loss(settings.log_every)
                log(
                    f"step {step + 1}/{settings.steps} loss {recent:.4f}"
                    f" kl {report.indexer_kls[-1]:.4f} lr {learning_rate(step, settings):.2e}"
                    f" load {report.max_expert_load[-1]:.2f} {'dense ' if dense else ''}"
                    f"wall {wall:.0f}s cpu {cpu_seconds() - cpu0:.0f}s"
                    f" ({report.tokens / wall:.0f} tok/s)"
                )
    finally:
        load.close()
        report.wall_s = time.perf_counter() - wall0
        report.cpu_s = cpu_seconds() - cpu0
        model.eval()
    return report
