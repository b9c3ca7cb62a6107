"""The dtype a served model computes in, when ``--dtype auto`` leaves it to ember.

The shipped checkpoints (and the published Kimi/GLM ones) are BF16, and BF16 is what ember
computes in wherever the device multiplies BF16 natively: a GPU, or a CPU whose oneDNN has BF16
kernels (AVX512-BW/VL/DQ, AVX512-BF16, AMX or AVX-NE-CONVERT). An AVX2-only CPU has none: there
PyTorch's BF16 matmul falls back to a scalar loop, 5-11x slower than float32 for the tiny
models' shapes (64 x 256 x 8192: 71 vs 13 ms, one thread, measured on an AMD EPYC without
AVX512), and a decode step at 64 sequences took 102 ms in BF16 against 26 ms in float32. So
``auto`` upcasts the weights to float32 there, as llama.cpp computes in float32 on such CPUs.
The weights take twice the memory; the KV cache's ``auto`` stays BF16 (the checkpoint's dtype),
so its capacity in tokens is what it is on any other machine. An explicit ``--dtype bfloat16``
still computes in BF16 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ember.models.kv.spec import KVCacheDtype

_BF16 = "bfloat16"
_FP32 = "float32"
# "float" is SGLang's and vLLM's shorthand for float32.
ALIASES = {"bfloat16": _BF16, "bf16": _BF16, "float32": _FP32, "fp32": _FP32, "float": _FP32}


def cpu_has_bf16_kernels() -> bool:
    """Whether oneDNN on this CPU has BF16 kernels (not on an AVX2-only CPU)."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def device_has_bf16_kernels(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_bf16_kernels()


@dataclass(frozen=True, slots=True)
class ComputeDtype:
    """What ``--dtype`` resolved to.

    ``name``: the weights' and activations' dtype (``bfloat16`` or ``float32``); ``kv_auto``: what
    ``--kv-cache-dtype auto`` means with it (``bf16`` unless float32 was asked for by name);
    ``why``: a note for the startup line when ``auto`` chose float32, else None.
    """

    name: str
    kv_auto: KVCacheDtype
    why: str | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.name == _BF16 else torch.float32


def resolve_compute_dtype(
    requested: str, device: torch.device, *, native: bool | None = None
) -> ComputeDtype:
    """``--dtype`` (``auto``, ``bfloat16``/``bf16``, ``float32``/``fp32``) on ``device``.

    ``native`` overrides the probe of the device (a test seam); None asks the device."""
    if requested != "auto":
        name = ALIASES[requested]
        return ComputeDtype(name, "bf16" if name == _BF16 else "float32")
    if native is None:
        native = device_has_bf16_kernels(device)
    if native:
        return ComputeDtype(_BF16, "bf16")
    return ComputeDtype(
        _FP32,
        "bf16",
        why=(
            f"this {device.type} has no BF16 matmul kernels (an AVX2-only CPU), so the BF16 "
            "weights compute in float32, several times faster there; --dtype bfloat16 forces BF16"
        ),
    )
