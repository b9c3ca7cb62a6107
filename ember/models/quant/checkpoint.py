"""Pre-quantized checkpoints: read their ``quantization_config`` and turn their tensors into layers.

Two published layouts, both weight-only:

- **FP8 block** (DeepSeek-V3 / Kimi K2 / GLM ``-FP8``): ``{"quant_method": "fp8", "fmt": "e4m3",
  "weight_block_size": [128, 128], "activation_scheme": "dynamic"}``; per quantized linear
  ``<name>.weight`` (float8_e4m3fn) and ``<name>.weight_scale_inv`` (float32 blocks).
- **compressed-tensors pack-quantized INT4** (Kimi K2-Thinking/K2.5/K2.6, W4A16 and W4AFP8
  cards): ``{"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups":
  {..: {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32,
  "symmetric": true}}}, "ignore": [...]}``; per layer ``<name>.weight_packed`` (int32
  ``[N, K/8]``), ``<name>.weight_scale`` ``[N, K/g]``, ``<name>.weight_shape`` (``[N, K]``).

Only symmetric INT4 is read (what these checkpoints ship); an asymmetric group is refused with a
``CheckpointError`` rather than guessed. Which layers are quantized is read off the tensors present
(``weight_scale_inv`` / ``weight_packed``), so a checkpoint's ``ignore`` list needs no regex engine.

Use (the loader reads the tensors, then)::

    quant = parse_checkpoint_quantization(config_json["quantization_config"])
    used = load_quantized_linears(model, tensors, quant, compute_dtype=torch.bfloat16)
    model.load_state_dict({k: v for k, v in tensors.items() if k not in used}, strict=False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from ember.errors import CheckpointError
from ember.models.quant.fp8 import FP8_DTYPE, Fp8BlockWeight, block_grid
from ember.models.quant.int4 import Int4Weight
from ember.models.quant.linear import QuantizedLinear
from ember.models.quant.methods import Fp8LinearMethod, Int4LinearMethod
from ember.models.quant_options import INT4_GROUP_SIZES

_SOURCE = "config.json: quantization_config"


@dataclass(frozen=True, slots=True)
class CheckpointQuantization:
    """The weight format a pre-quantized checkpoint declares."""

    method: Literal["fp8", "int4"]
    fp8_block: tuple[int, int] = (128, 128)
    group_size: int = 32


def parse_checkpoint_quantization(config: Mapping[str, Any]) -> CheckpointQuantization:
    """Read ``quantization_config``; a format ember cannot run is a ``CheckpointError``."""
    method = config.get("quant_method")
    if method == "fp8":
        fmt = config.get("fmt", "e4m3")
        block = config.get("weight_block_size")
        if fmt != "e4m3":
            raise CheckpointError(f"{_SOURCE}.fmt is {fmt!r}; ember reads FP8 e4m3 weights only")
        if not (isinstance(block, list) and len(block) == 2 and all(_is_int(b) for b in block)):
            raise CheckpointError(
                f"{_SOURCE}.weight_block_size is {block!r}; expected [rows, cols] (e.g. [128, 128])"
            )
        return CheckpointQuantization("fp8", fp8_block=(int(block[0]), int(block[1])))
    if method == "compressed-tensors":
        return _parse_compressed_tensors(config)
    raise CheckpointError(
        f"{_SOURCE}.quant_method is {method!r}; ember reads 'fp8' (block-scaled e4m3) and "
        "'compressed-tensors' (pack-quantized INT4)"
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _parse_compressed_tensors(config: Mapping[str, Any]) -> CheckpointQuantization:
    fmt = config.get("format")
    if fmt != "pack-quantized":
        raise CheckpointError(f"{_SOURCE}.format is {fmt!r}; ember reads 'pack-quantized' INT4")
    groups = config.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise CheckpointError(f"{_SOURCE}.config_groups is missing or empty")
    sizes = set()
    for key, group in groups.items():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        where = f"{_SOURCE}.config_groups.{key}.weights"
        if not isinstance(weights, Mapping):
            raise CheckpointError(f"{where} is missing")
        wanted = {"num_bits": 4, "type": "int", "strategy": "group", "symmetric": True}
        for field, value in wanted.items():
            if weights.get(field) != value:
                raise CheckpointError(
                    f"{where}.{field} is {weights.get(field)!r}; ember reads {value!r} "
                    "(symmetric group-wise INT4)"
                )
        size = weights.get("group_size")
        if size not in INT4_GROUP_SIZES:
            allowed = ", ".join(map(str, INT4_GROUP_SIZES))
            raise CheckpointError(f"{where}.group_size is {size!r}; expected one of {allowed}")
        sizes.add(size)
    if len(sizes) != 1:
        raise CheckpointError(f"{_SOURCE}: config groups use several group sizes {sorted(sizes)}")
    return CheckpointQuantization("int4", group_size=sizes.pop())


def fp8_checkpoint_tensors(name: str, fp8: Fp8BlockWeight) -> dict[str, torch.Tensor]:
    """What an FP8 checkpoint stores for the linear ``name``."""
    return {f"{name}.weight": fp8.qweight, f"{name}.weight_scale_inv": fp8.scale_inv}


def int4_checkpoint_tensors(name: str, q: Int4Weight) -> dict[str, torch.Tensor]:
    """What a compressed-tensors pack-quantized checkpoint stores for the linear ``name``."""
    if q.zeros is not None:
        raise ValueError("compressed-tensors layout here is symmetric only; got zeros")
    shape = torch.tensor([q.out_features, q.in_features], dtype=torch.int32)
    return {
        f"{name}.weight_packed": q.packed.view(torch.int32),
        f"{name}.weight_scale": q.scales,
        f"{name}.weight_shape": shape,
    }


def load_quantized_linears(
    model: nn.Module,
    tensors: Mapping[str, torch.Tensor],
    quant: CheckpointQuantization,
    *,
    compute_dtype: torch.dtype,
    use_kernels: bool = True,
) -> set[str]:
    """Swap each linear layer with quantized tensors in ``tensors`` for a ``QuantizedLinear``.

    Returns the tensor names consumed; the caller loads the rest as usual (biases included).
    """
    used: set[str] = set()
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear | QuantizedLinear):
            continue
        if quant.method == "fp8" and f"{name}.weight_scale_inv" in tensors:
            method = Fp8LinearMethod(quant.fp8_block, use_kernels=use_kernels)
            layer, names = _fp8_layer(name, module, tensors, method, compute_dtype)
        elif quant.method == "int4" and f"{name}.weight_packed" in tensors:
            method4 = Int4LinearMethod(quant.group_size, use_kernels=use_kernels)
            layer, names = _int4_layer(name, module, tensors, method4, compute_dtype)
        else:
            continue
        bias = tensors.get(f"{name}.bias")
        if bias is not None and layer.bias is not None:
            layer.bias.data = bias.to(compute_dtype).clone()
            names.add(f"{name}.bias")
        layer.method.process_weights_after_loading(layer)
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, layer)
        used |= names
    return used


def _expect(name: str, tensor: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    if tuple(tensor.shape) != shape:
        raise CheckpointError(
            f"tensor {name!r} has shape {list(tensor.shape)}, expected {list(shape)}"
        )
    if tensor.dtype != dtype:
        raise CheckpointError(f"tensor {name!r} has dtype {tensor.dtype}, expected {dtype}")


def _fp8_layer(
    name: str,
    module: nn.Module,
    tensors: Mapping[str, torch.Tensor],
    method: Fp8LinearMethod,
    compute_dtype: torch.dtype,
) -> tuple[QuantizedLinear, set[str]]:
    n, k = module.out_features, module.in_features
    weight, scale = tensors[f"{name}.weight"], tensors[f"{name}.weight_scale_inv"]
    _expect(f"{name}.weight", weight, (n, k), FP8_DTYPE)
    grid = block_grid(n, k, method.block_size)
    _expect(f"{name}.weight_scale_inv", scale, grid, torch.float32)
    layer = QuantizedLinear(k, n, method, bias=module.bias is not None, compute_dtype=compute_dtype)
    layer.weight = weight.contiguous()
    layer.weight_scale_inv = scale.contiguous()
    return layer, {f"{name}.weight", f"{name}.weight_scale_inv"}


def _int4_layer(
    name: str,
    module: nn.Module,
    tensors: Mapping[str, torch.Tensor],
    method: Int4LinearMethod,
    compute_dtype: torch.dtype,
) -> tuple[QuantizedLinear, set[str]]:
    n, k, g = module.out_features, module.in_features, method.group_size
    k_pad = -(-k // g) * g
    packed, scale = tensors[f"{name}.weight_packed"], tensors[f"{name}.weight_scale"]
    names = {f"{name}.weight_packed", f"{name}.weight_scale"}
    shape = tensors.get(f"{name}.weight_shape")
    if shape is not None:
        names.add(f"{name}.weight_shape")
        if [int(v) for v in shape.tolist()] != [n, k]:
            raise CheckpointError(
                f"tensor {name}.weight_shape is {shape.tolist()}, expected {[n, k]}"
            )
    _expect(f"{name}.weight_packed", packed, (n, k_pad // 8), torch.int32)
    if tuple(scale.shape) != (n, k_pad // g) or not scale.is_floating_point():
        raise CheckpointError(
            f"tensor {name}.weight_scale has shape {list(scale.shape)} and dtype {scale.dtype}, "
            f"expected float [{n}, {k_pad // g}] (group size {g})"
        )
    method = Int4LinearMethod(g, scale_dtype=scale.dtype, use_kernels=method.use_kernels)
    layer = QuantizedLinear(k, n, method, bias=module.bias is not None, compute_dtype=compute_dtype)
    method.store(layer, Int4Weight(packed.contiguous().view(torch.uint8), scale, None, k, g))
    return layer, names
