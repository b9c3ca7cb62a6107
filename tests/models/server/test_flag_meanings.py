"""Launch flags mean on ``ember models serve`` what they mean on ``sglang.launch_server`` and
``vllm serve`` (review27): an INT4 group size the kernel lacks is refused before anything
loads, ``--quantization fp8`` covers every linear layer, ``--chunked-prefill-size -1`` turns
chunking off, vLLM's ``--kv-cache-dtype fp8`` and the ``--dtype`` aliases are taken, and the
startup log's KV figures are the pool's own."""

from __future__ import annotations

import io
import re
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from ember.cli.main import cli
from ember.errors import ConfigError
from ember.models.server.settings import ServerSettings
from tests.models.server.live import running_server, server_settings

GIB = 2**30


def _serve(*args: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, list[ServerSettings]]:
    """``ember models serve`` on a catalog id with ``args``: exit code, output and the settings
    the server would have been started with (it is not started)."""
    seen: list[ServerSettings] = []
    monkeypatch.setattr(
        "ember.models.server.runner.run_server",
        lambda settings, **_: seen.append(settings) or 0,
    )
    result = CliRunner().invoke(cli, ["models", "serve", "@cf/moonshotai/kimi-k2.5", *args])
    return result.exit_code, result.output + str(result.exception or ""), seen


def test_int4_group_sizes_are_the_kernels_and_refused_at_parse_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, said, seen = _serve(
        "--quantization", "int4", "--quantization-group-size", "256", monkeypatch=monkeypatch
    )
    assert code != 0 and not seen, said
    assert "--quantization-group-size" in said and "32, 64 or 128" in said, said
    code, said, seen = _serve(
        "--quantization", "int4", "--quantization-group-size", "128", monkeypatch=monkeypatch
    )
    assert code == 0 and seen[0].quantization_group_size == 128, said


@pytest.mark.parametrize("quantization", ["none", "fp8"])
def test_a_group_size_without_int4_is_refused(
    quantization: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ("--quantization", quantization, "--quantization-group-size", "64")
    code, said, seen = _serve(*args, monkeypatch=monkeypatch)
    assert code != 0 and not seen, said
    assert "--quantization-group-size" in said and "only with --quantization int4" in said


def test_quantization_targets_follow_the_method(monkeypatch: pytest.MonkeyPatch) -> None:
    def targets(*args: str) -> str:
        code, said, seen = _serve(*args, monkeypatch=monkeypatch)
        assert code == 0, said
        return seen[0].quantization_targets

    assert targets("--quantization", "fp8") == "all"  # as SGLang's and vLLM's fp8
    assert targets("--quantization", "int4") == "experts"  # as Kimi's native INT4
    assert targets("--quantization", "fp8", "--quantization-targets", "experts") == "experts"
    assert targets("--quantization", "int4", "--quantization-targets", "all") == "all"


def test_fp8_quantizes_attention_too(kimi_dir: Path) -> None:
    settings = server_settings(str(kimi_dir), quantization="fp8")
    with running_server(settings) as live:
        served = live.state.served
        assert served is not None and served.quantization is not None
        converted = served.quantization.layers["fp8"]
    experts_only = server_settings(
        str(kimi_dir), quantization="fp8", quantization_targets="experts"
    )
    with running_server(experts_only) as live:
        served = live.state.served
        assert served is not None and served.quantization is not None
        assert served.quantization.layers["fp8"] < converted


def test_a_gpu_fraction_on_cpu_says_how_much_host_memory_it_takes() -> None:
    settings = ServerSettings("m", mem_fraction_static=0.9)
    budget = settings.kv_budget(total_bytes=23 * GIB, available_after_weights=20 * GIB)
    note = settings.kv_budget_note(budget)
    assert note is not None and "17.70 GiB of host memory" in note, note
    assert "--kv-cache-bytes" in note and "--mem-fraction-static 0.9" in note, note
    for quiet in (
        ServerSettings("m"),
        ServerSettings("m", kv_cache_bytes=GIB),
        ServerSettings("m", device="cuda", mem_fraction_static=0.9),
    ):
        assert quiet.kv_budget_note(quiet.kv_budget(23 * GIB, 20 * GIB)) is None


def test_chunked_prefill_minus_one_turns_chunking_off(monkeypatch: pytest.MonkeyPatch) -> None:
    code, said, seen = _serve("--chunked-prefill-size", "-1", monkeypatch=monkeypatch)
    assert code == 0, said
    # A whole prompt of the context length in one step, beside every running request's decode.
    assert seen[0].step_tokens(4096) == 4096 + 128
    assert ServerSettings("m", chunked_prefill_size=512).step_tokens(4096) == 512
    with pytest.raises(ConfigError, match="--chunked-prefill-size"):
        ServerSettings("m", chunked_prefill_size=0)


def test_the_step_budget_error_says_what_it_counts_and_what_to_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, said, seen = _serve("--max-running-requests", "2048", monkeypatch=monkeypatch)
    assert code != 0 and not seen, said
    assert "each running request's decode token" in said, said
    assert "--chunked-prefill-size 2048 or more" in said and "-1" in said, said


def test_unchunked_server_prefills_a_long_prompt_in_one_step(glm_dir: Path) -> None:
    settings = server_settings(str(glm_dir), served_model_name="g", chunked_prefill_size=-1)
    with running_server(settings) as live:
        served = live.state.served
        assert served is not None
        assert served.llm.config.max_num_batched_tokens >= served.context_length
        body = {"model": "g", "prompt": "def f(x):\n" * 200, "max_tokens": 2}
        answer = httpx.post(live.url + "/v1/completions", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
        assert answer.json()["usage"]["prompt_tokens"] > 256  # past the default test chunk


def test_vllm_and_sglang_dtype_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    code, said, seen = _serve(
        "--kv-cache-dtype", "fp8", "--dtype", "float", monkeypatch=monkeypatch
    )
    assert code == 0, said
    assert (seen[0].kv_cache_dtype, seen[0].dtype) == ("fp8", "float")
    for half in ("half", "float16"):
        code, said, seen = _serve("--dtype", half, monkeypatch=monkeypatch)
        assert code != 0 and not seen, said
        assert "--dtype: expected" in said and f"found '{half}'" in said, said
        assert "bfloat16 or float32" in said, said


def test_float_computes_in_float32(glm_dir: Path) -> None:
    with running_server(server_settings(str(glm_dir), dtype="float")) as live:
        assert live.state.served is not None and live.state.served.model_dtype == "float32"


def test_the_logged_kv_budget_is_the_pools_under_max_total_tokens(glm_dir: Path) -> None:
    log = io.StringIO()
    settings = server_settings(str(glm_dir), max_total_tokens=100)
    with running_server(settings, log=log) as live:
        served = live.state.served
        assert served is not None
        kv = served.kv
    assert kv.capacity_tokens == 96
    line = next(x for x in log.getvalue().splitlines() if "KV cache:" in x)
    mib = float(re.search(r"budget ([\d.]+) MiB", line).group(1))  # type: ignore[union-attr]
    assert mib == round(96 * kv.bytes_per_token / 2**20, 1), line
    assert kv.budget_bytes == 96 * kv.bytes_per_token
