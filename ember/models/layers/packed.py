"""A BF16 ``nn.Linear`` whose weight lives only in oneDNN's prepacked layout (inference only).

``F.linear`` on CPU re-blocks the weight for oneDNN's kernels on every call; a vocabulary
projection (``lm_head``, 8192 x 256 in the tiny checkpoints) pays that on every step. A weight
reordered once (``torch.ops.mkldnn._reorder_linear_weight``) and used through
``_linear_pointwise`` gives bit-identical BF16 results at ~0.78x the CPU time (2.0 vs 1.5 ms
at 64 rows, one thread). The packed tensor *replaces* the plain weight, so there is no second
copy of the matrix (1.5 GB for GLM-4.7's vocabulary); the plain weight is recovered exactly
when asked for (``weight``, ``state_dict``) by multiplying the identity through the packed form:
each output is one product by 1.0 plus zeros, so no rounding. Float32 is not packed: oneDNN's
blocking changes its float32 sums.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ember.errors import ConfigError
from ember.models.compute_dtype import cpu_has_bf16_kernels


def bf16_packing_supported() -> bool:
    """Whether oneDNN here has BF16 kernels. A CPU without AVX512-BW/VL/DQ or AVX-NE-CONVERT
    (an AVX2-only one) has none: its reorder raises, so the plain head is kept there."""
    return cpu_has_bf16_kernels()


def can_pack(linear: nn.Module) -> bool:
    """Whether ``linear`` can become a ``PackedLinear`` with bit-identical outputs."""
    if type(linear) is not nn.Linear or not bf16_packing_supported():
        return False
    weight = linear.weight
    return weight.dtype == torch.bfloat16 and weight.device.type == "cpu"


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), None)


class PackedLinear(nn.Module):
    """``linear(x)`` through a prepacked weight; built by ``PackedLinear.of(linear)``.

    The packed tensor is opaque (no storage, no ``to``), so it is a plain attribute, not a
    parameter: ``state_dict`` and loads go through the exact unpacked ``weight`` instead.
    """

    def __init__(self, packed: torch.Tensor, bias: torch.Tensor | None, in_features: int):
        super().__init__()
        self.in_features = in_features
        self.out_features = packed.shape[0]
        self.packed = packed
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    @classmethod
    def of(cls, linear: nn.Module) -> PackedLinear:
        if not can_pack(linear):
            raise ConfigError("model", "lm_head", type(linear).__name__, "a BF16 nn.Linear on CPU")
        return cls(_pack(linear.weight), linear.bias, linear.in_features)  # type: ignore[arg-type]

    @property
    def weight(self) -> torch.Tensor:
        """The plain ``(out, in)`` weight, recomputed exactly (a fresh tensor each time)."""
        eye = torch.eye(self.in_features, dtype=torch.bfloat16)
        with torch.no_grad():
            return self._linear(eye, None).t().contiguous()

    def unpacked(self) -> nn.Linear:
        """An ordinary ``nn.Linear`` with the same weights (the reference path)."""
        linear = nn.Linear(
            self.in_features, self.out_features, bias=self.bias is not None, dtype=torch.bfloat16
        )
        with torch.no_grad():
            linear.weight.copy_(self.weight)
            if self.bias is not None:
                linear.bias.copy_(self.bias)  # type: ignore[union-attr]
        return linear

    def _linear(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, bias, "none", [], "")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            # No gradient flows through an opaque weight: train on ``unpacked()``.
            return F.linear(x, self.weight, self.bias)
        if x.dtype != torch.bfloat16:
            return F.linear(x, self.weight.to(x.dtype), self.bias)
        return self._linear(x, self.bias)

    def _save_to_state_dict(self, destination, prefix, keep_vars):  # noqa: ANN001
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "weight"] = self.weight

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # noqa: ANN001
        weight = state_dict.get(prefix + "weight")
        if weight is not None:
            if tuple(weight.shape) != (self.out_features, self.in_features):
                raise ConfigError(
                    "model", prefix + "weight", tuple(weight.shape), "the packed layer's shape"
                )
            self.packed = _pack(weight.to(torch.bfloat16))
            state_dict = {k: v for k, v in state_dict.items() if k != prefix + "weight"}
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def __getstate__(self) -> dict:
        # The opaque tensor has no storage to copy or pickle: deepcopy and torch.save carry the
        # exact plain weight instead, and the copy packs it again.
        state = dict(self.__dict__)
        state["packed"] = None
        state["_plain_weight"] = self.weight
        return state

    def __setstate__(self, state: dict) -> None:
        plain = state.pop("_plain_weight")
        self.__dict__.update(state)
        self.packed = _pack(plain)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed"
