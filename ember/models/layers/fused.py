"""Several ``nn.Linear`` on the same input run as one matmul (inference only).

At a decode batch of 64 tokens and hidden size 256 a projection is a few microseconds of
arithmetic and tens of microseconds of dispatch and cold-cache setup, so GQA's ``q/k/v_proj`` and
a SwiGLU block's ``gate/up_proj`` cost about 2-3x more as separate calls than as one. Here their
weights (and biases) are re-pointed, once, to consecutive rows of one new tensor: one ``F.linear``
over the joined rows computes all of them, while checkpoints, in-place loads and quantization
still see one ``nn.Linear`` per projection (no second copy of the weights). ``model.to`` or a
quantized swap replaces the weights; the next call notices (data pointers, module types) and
re-joins or falls back to the separate modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(slots=True)
class _Joined:
    modules: tuple[nn.Module, ...]
    probes: tuple[int, ...]
    weight: torch.Tensor  # (sum of out_features, in_features)
    bias: torch.Tensor | None


def _probes(linears: tuple[nn.Module, ...]) -> tuple[int, ...]:
    out = []
    for m in linears:
        out.append(m.weight.data_ptr())  # type: ignore[operator]
        if m.bias is not None:
            out.append(m.bias.data_ptr())  # type: ignore[union-attr]
    return tuple(out)


def _joinable(linears: tuple[nn.Module, ...]) -> bool:
    if any(type(m) is not nn.Linear for m in linears):
        return False  # e.g. a quantized linear: it has its own kernel
    first = linears[0].weight
    has_bias = linears[0].bias is not None
    return all(
        m.weight.dtype == first.dtype  # type: ignore[union-attr]
        and m.weight.device == first.device  # type: ignore[union-attr]
        and m.weight.shape[1] == first.shape[1]  # type: ignore[index]
        and (m.bias is not None) == has_bias
        for m in linears
    )


def _adjacent_view(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The tensors as one ``(sum of rows, ...)`` view when they already are consecutive rows of
    one storage (e.g. a stacked expert's ``gate_proj`` and ``up_proj``), else ``None``."""
    first = tensors[0]
    expected = first.data_ptr()
    for t in tensors:
        if not t.is_contiguous() or t.data_ptr() != expected:
            return None
        if t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr():
            return None
        expected += t.numel() * t.element_size()
    rows = sum(t.shape[0] for t in tensors)
    size = (rows, *first.shape[1:])
    return first.detach().as_strided(size, first.stride(), first.storage_offset())


def _join(linears: tuple[nn.Module, ...]) -> _Joined:
    """One tensor for all the weights: a view when they already are consecutive rows of one
    storage, else a copy with each module re-pointed at its rows."""
    weights = [m.weight for m in linears]
    biases = [m.bias for m in linears if m.bias is not None]
    weight = _adjacent_view(weights)  # type: ignore[arg-type]
    bias = _adjacent_view(biases) if biases else None  # type: ignore[arg-type]
    if weight is not None and (bias is not None or not biases):
        return _Joined(linears, _probes(linears), weight, bias)
    # Outside inference mode: the new storage backs ordinary parameters (as moe_grouped does).
    with torch.inference_mode(False), torch.no_grad():
        weight = torch.cat([m.weight for m in linears])  # type: ignore[misc]
        bias = None
        if linears[0].bias is not None:
            bias = torch.cat([m.bias for m in linears])  # type: ignore[misc]
        start = 0
        for m in linears:
            rows = m.weight.shape[0]  # type: ignore[index]
            m.weight.data = weight[start : start + rows]  # type: ignore[union-attr]
            if bias is not None:
                m.bias.data = bias[start : start + rows]  # type: ignore[union-attr]
            start += rows
    return _Joined(linears, _probes(linears), weight, bias)


class JoinedLinears:
    """The joined weight of some sibling ``nn.Linear`` modules, kept current across calls.

    Held as a plain attribute (not a submodule or buffer: ``model.to`` and ``state_dict`` must
    not see it). ``get`` costs a few attribute reads per call once joined.
    """

    def __init__(self) -> None:
        self._joined: _Joined | None = None
        self._refused: tuple[nn.Module, ...] | None = None

    def get(self, *linears: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """``(weight, bias)`` computing ``cat([m(x) for m in linears], -1)`` as one
        ``F.linear``, or ``None`` when the modules cannot be joined (or autograd is on: the
        joined tensor is not what the parameters' gradients flow through)."""
        if torch.is_grad_enabled():
            return None
        joined = self._joined
        if joined is not None and joined.modules == linears and _probes(linears) == joined.probes:
            return joined.weight, joined.bias
        if self._refused == linears:
            return None
        self._joined = None
        if not _joinable(linears):
            self._refused = linears
            return None
        self._refused = None
        joined = self._joined = _join(linears)
        return joined.weight, joined.bias
