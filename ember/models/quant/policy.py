"""Quantize a loaded model in place by policy, and count its weight bytes.

``quantize_model(model, QuantConfig(scheme="int4", targets="experts"))`` swaps every selected
``nn.Linear`` (or FP8 ``QuantizedLinear``: INT4-from-FP8, the seed's path) for a
``QuantizedLinear``, one layer at a time so peak memory grows by one matrix, not one model.

Selection (module names as HF checkpoints name them):

- ``experts``: ``...mlp.experts.<e>.{gate,up,down}_proj`` (routed experts only; shared experts and
  dense MLPs stay as they are, as in Kimi's native INT4 and the W4AFP8 checkpoints);
- ``all``: every linear layer except the ones below;
- never: embeddings, norms, the router ``mlp.gate`` (not ``nn.Linear``; a ``Linear`` named so is
  skipped too), ``self_attn.kv_b_proj`` (MLA reads its matrix directly to absorb it into the
  query/output, so it must stay dense; SGLang likewise dequantizes it at load), ``lm_head`` unless
  ``include_lm_head``, and any name matched by ``config.skip``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch import nn

from ember.models.quant.config import QuantConfig
from ember.models.quant.linear import LinearMethod, QuantizedLinear
from ember.models.quant.methods import Int4LinearMethod, linear_method

ROUTED_EXPERT = re.compile(r"(^|\.)mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)$")
_NEVER = (
    re.compile(r"(^|\.)gate$"),  # the MoE router
    re.compile(r"(^|\.)kv_b_proj$"),  # read as a matrix by MLA's weight absorption
)
_LM_HEAD = re.compile(r"(^|\.)lm_head$")


@dataclass(frozen=True, slots=True)
class QuantizationReport:
    """What ``quantize_model`` did: layers per scheme and the weight bytes before and after."""

    layers: dict[str, int] = field(default_factory=dict)  # scheme -> layers converted
    bytes_before: int = 0  # weight bytes of the converted layers, before
    bytes_after: int = 0  # and after (resident, kernel layout included)
    # The dtype the converted INT4 layers run PyTorch's CPU kernel in (BF16 on x86, even for a
    # float32 model); None when no layer runs that kernel (reference path, no kernel, no INT4).
    int4_kernel_dtype: torch.dtype | None = None


def _is_linear(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear | QuantizedLinear)


def scheme_for(name: str, config: QuantConfig) -> str:
    """The scheme ``config`` gives the linear layer called ``name`` (``none`` = leave dense)."""
    if any(p.search(name) for p in _NEVER) or any(re.search(p, name) for p in config.skip):
        return "none"
    if _LM_HEAD.search(name) and not config.include_lm_head:
        return "none"
    if config.targets == "all" or ROUTED_EXPERT.search(name):
        return config.scheme
    return config.others


def _nbytes(module: nn.Module) -> int:
    if isinstance(module, QuantizedLinear):
        return module.weight_nbytes()
    return module.weight.numel() * module.weight.element_size()


@torch.no_grad()
def quantize_model(model: nn.Module, config: QuantConfig) -> QuantizationReport:
    """Quantize ``model``'s linear layers in place as ``config`` says; returns what changed.

    A layer whose weight is shared with another module (``lm_head`` tied to the embeddings) is
    left alone: quantizing it would silently untie or corrupt the embedding.
    """
    shared = _shared_weight_ids(model)
    counts: Counter[str] = Counter()
    before = after = 0
    kernel_dtype: torch.dtype | None = None
    for name, module in list(model.named_modules()):
        if not _is_linear(module):
            continue
        scheme = scheme_for(name, config)
        current = module.method.scheme if isinstance(module, QuantizedLinear) else "none"
        if scheme == "none" or scheme == current:
            continue
        if isinstance(module, nn.Linear) and id(module.weight) in shared:
            continue
        method = linear_method(scheme, config)
        replacement = _requantize(module, method)
        before += _nbytes(module)
        after += replacement.weight_nbytes()
        _set_submodule(model, name, replacement)
        counts[scheme] += 1
        if isinstance(method, Int4LinearMethod):
            kernel = method.kernel_weights(replacement)
            kernel_dtype = kernel.dtype if kernel is not None else kernel_dtype
    return QuantizationReport(dict(counts), before, after, kernel_dtype)


def _requantize(module: nn.Module, method: LinearMethod) -> QuantizedLinear:
    if isinstance(module, QuantizedLinear):
        # FP8 (or INT4) -> another scheme: go through float32, not the compute dtype.
        dense = module.dequantized_weight(torch.float32)
        return QuantizedLinear.from_dense(
            dense, module.bias, method, compute_dtype=module.compute_dtype
        )
    assert isinstance(module, nn.Linear)
    return QuantizedLinear.from_linear(module, method)


def _shared_weight_ids(model: nn.Module) -> set[int]:
    owners: Counter[int] = Counter()
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.Tensor):
            owners[id(weight)] += 1
    return {ident for ident, n in owners.items() if n > 1}


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Resident bytes of a model's weights, split by how they are stored."""

    total: int
    by_scheme: dict[str, int]  # "none" (dense linear), "fp8", "int4", "other" (embeddings...)


def model_weight_bytes(model: nn.Module) -> WeightBytes:
    """Bytes of every parameter and buffer, each tensor counted once (tied weights)."""
    seen: set[int] = set()
    by_scheme: Counter[str] = Counter()
    for module in model.modules():
        if isinstance(module, QuantizedLinear):
            kind = module.method.scheme
        elif isinstance(module, nn.Linear):
            kind = "none"
        else:
            kind = "other"
        tensors = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        for tensor in tensors:
            key = tensor.data_ptr() if tensor.numel() else id(tensor)
            if key in seen:
                continue
            seen.add(key)
            by_scheme[kind] += tensor.numel() * tensor.element_size()
    return WeightBytes(sum(by_scheme.values()), dict(by_scheme))
