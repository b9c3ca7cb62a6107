"""``--dtype auto``: BF16 where the device has BF16 kernels, float32 where it has none (an
AVX2-only CPU), with the KV cache's ``auto`` staying BF16 either way."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ember.models import compute_dtype
from ember.models.compute_dtype import resolve_compute_dtype
from ember.models.quant import QuantizedLinear
from ember.models.quant.int4_kernel import cpu_int4_kernel_available, int4_kernel_dtype
from tests.models.server.live import running_server, server_settings

CPU = torch.device("cpu")


def test_auto_is_bf16_where_the_device_has_bf16_kernels() -> None:
    chosen = resolve_compute_dtype("auto", CPU, native=True)
    assert (chosen.name, chosen.kv_auto, chosen.why) == ("bfloat16", "bf16", None)
    assert chosen.torch_dtype is torch.bfloat16


def test_auto_is_float32_compute_with_bf16_kv_where_there_are_none() -> None:
    chosen = resolve_compute_dtype("auto", CPU, native=False)
    assert (chosen.name, chosen.kv_auto) == ("float32", "bf16")
    assert chosen.torch_dtype is torch.float32
    assert chosen.why is not None and "--dtype bfloat16" in chosen.why


@pytest.mark.parametrize(
    ("flag", "name", "kv_auto"),
    [
        ("bfloat16", "bfloat16", "bf16"),
        ("bf16", "bfloat16", "bf16"),
        ("fp32", "float32", "float32"),
    ],
)
@pytest.mark.parametrize("native", [True, False])
def test_a_named_dtype_is_kept_whatever_the_device(
    flag: str, name: str, kv_auto: str, native: bool
) -> None:
    chosen = resolve_compute_dtype(flag, CPU, native=native)
    assert (chosen.name, chosen.kv_auto, chosen.why) == (name, kv_auto, None)


@pytest.mark.parametrize("native", [True, False])
def test_the_served_model_computes_in_the_resolved_dtype(
    kimi_dir: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    # The probe is the seam: this machine's CPU answers one way, the test covers both.
    monkeypatch.setattr(compute_dtype, "cpu_has_bf16_kernels", lambda: native)
    lines: list[str] = []
    with running_server(server_settings(str(kimi_dir)), log=_Lines(lines)) as live:
        served = live.state.served
        assert served is not None
        expected = torch.bfloat16 if native else torch.float32
        linears = [m for m in served.llm.runner.model.modules() if isinstance(m, torch.nn.Linear)]
        assert linears and all(m.weight.dtype is expected for m in linears)
        assert served.model_dtype == ("bfloat16" if native else "float32")
        assert served.kv.dtype == "bf16"  # the cache holds as many tokens either way
        text = "".join(lines)
        assert ("no BF16 matmul kernels" in text) is (not native)


@pytest.mark.skipif(not cpu_int4_kernel_available(), reason="no CPU int4 kernel")
@pytest.mark.parametrize("native", [True, False])
def test_int4_layers_run_the_kernel_in_its_own_dtype_and_the_log_says_so(
    kimi_dir: Path, monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    monkeypatch.setattr(compute_dtype, "cpu_has_bf16_kernels", lambda: native)
    lines: list[str] = []
    settings = server_settings(str(kimi_dir), quantization="int4")
    with running_server(settings, log=_Lines(lines)) as live:
        served = live.state.served
        assert served is not None
        compute = torch.bfloat16 if native else torch.float32
        kernel = int4_kernel_dtype(compute)  # BF16 on this x86 CPU either way
        int4 = [
            m
            for m in served.llm.runner.model.modules()
            if isinstance(m, QuantizedLinear) and m.method.scheme == "int4"
        ]
        assert int4 and all(m.kernel_scales_and_zeros.dtype is kernel for m in int4)
        text = "".join(lines)
        note = f"matmuls run in {str(kernel).removeprefix('torch.')}"
        assert "linear layers to int4" in text
        assert (note in text) is (kernel is not compute), text


class _Lines:
    def __init__(self, into: list[str]) -> None:
        self._into = into

    def write(self, text: str) -> int:
        self._into.append(text)
        return len(text)

    def flush(self) -> None:
        pass
