"""What to quantize and how: the typed ``QuantConfig`` the engine builds from its flags.

``--quantization none|bf16|fp8|int4`` (SGLang's flag name) picks the scheme of the *target* layers;
``targets`` picks which layers: ``"experts"`` = routed experts only (``...mlp.experts.<e>.*``, the
layers that hold ~95% of a Kimi/GLM checkpoint's bytes; how the seed's 705 -> 421 GB works), or
``"all"`` = every ``nn.Linear``. Embeddings, norms and the MoE router are never quantized (they are
not ``nn.Linear``, and the router makes discrete choices); ``lm_head`` only with
``include_lm_head``. ``others`` optionally quantizes the non-target linear layers with a second
scheme (``int4`` experts + ``fp8`` rest = the W4AFP8 checkpoints' layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

from ember.errors import ConfigError
from ember.models.quant.fp8 import DEFAULT_FP8_BLOCK
from ember.models.quant.int4 import check_group_size

Scheme = Literal["none", "fp8", "int4"]
Targets = Literal["experts", "all"]
SCHEMES: tuple[str, ...] = get_args(Scheme)
TARGETS: tuple[str, ...] = get_args(Targets)
_SCHEME_ALIASES = {"none": "none", "bf16": "none", "bfloat16": "none", "fp8": "fp8", "int4": "int4"}
_CONFIG = "quantization"


@dataclass(frozen=True, slots=True)
class QuantConfig:
    """A validated quantization policy (see the module docstring)."""

    scheme: Scheme = "none"
    targets: Targets = "experts"
    group_size: int = 32
    symmetric: bool = True
    scale_dtype: torch.dtype = torch.bfloat16
    fp8_block: tuple[int, int] = DEFAULT_FP8_BLOCK
    include_lm_head: bool = False
    others: Scheme = "none"
    skip: tuple[str, ...] = ()  # regexes (re.search) of module names to leave alone
    use_kernels: bool = True  # False: every layer runs its reference path (tests, debugging)
    # The activation dtype of PyTorch's CPU INT4 kernel; None: ``int4_kernel_dtype`` picks the one
    # the kernel is vectorised for here (BF16 on x86), whatever the compute dtype.
    int4_kernel_dtype: torch.dtype | None = None

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ConfigError(_CONFIG, "scheme", self.scheme, f"one of {', '.join(SCHEMES)}")
        if self.others not in SCHEMES:
            raise ConfigError(_CONFIG, "others", self.others, f"one of {', '.join(SCHEMES)}")
        if self.targets not in TARGETS:
            raise ConfigError(_CONFIG, "targets", self.targets, f"one of {', '.join(TARGETS)}")
        if self.targets == "all" and self.others != "none":
            raise ConfigError(
                _CONFIG, "others", self.others, "'none' when targets is 'all' (nothing is left)"
            )
        check_group_size(self.group_size)
        if self.scale_dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ConfigError(
                _CONFIG, "scale_dtype", self.scale_dtype, "bfloat16, float16 or float32"
            )
        if self.int4_kernel_dtype not in (None, torch.bfloat16, torch.float16, torch.float32):
            raise ConfigError(
                _CONFIG,
                "int4_kernel_dtype",
                self.int4_kernel_dtype,
                "None (the CPU's choice), bfloat16, float16 or float32",
            )
        if len(self.fp8_block) != 2 or any(b <= 0 for b in self.fp8_block):
            raise ConfigError(_CONFIG, "fp8_block", self.fp8_block, "two positive block sizes")

    @classmethod
    def from_flag(cls, quantization: str | None, **options: object) -> QuantConfig:
        """From the server flag: ``none``/``bf16`` (unquantized), ``fp8``, ``int4``."""
        key = (quantization or "none").strip().lower()
        if key not in _SCHEME_ALIASES:
            raise ConfigError("--quantization", None, quantization, "one of none, bf16, fp8, int4")
        return cls(scheme=_SCHEME_ALIASES[key], **options)  # type: ignore[arg-type]
