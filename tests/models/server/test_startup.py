"""Startup: the port answers while the model loads, /health says 503 until it is ready, and
``ember models serve`` prints its progress; a model that cannot load stops the server."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ember.errors import ConfigError
from ember.models.server.settings import ServerSettings, parse_bytes
from ember.models.server.state import ServerState
from tests.models.server.live import running_server, server_settings, wait_until

REPO = Path(__file__).resolve().parents[3]


def _startup_lines(process: subprocess.Popen[str], ends: tuple[str, ...]) -> list[str]:
    """The server's stderr lines up to and including the first that contains one of ``ends``."""
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        if any(end in line for end in ends):
            break
    return lines


def test_no_traffic_before_the_model_is_ready(kimi_dir: Path) -> None:
    settings = server_settings(str(kimi_dir), served_model_name="kimi")
    with running_server(settings, load=False) as live:
        health = httpx.get(live.url + "/health")
        assert health.status_code == 503 and health.json()["status"] == "loading"
        for path in ("/v1/models", "/get_model_info"):
            refused = httpx.get(live.url + path)
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "model_loading"
        body = {"model": "kimi", "messages": [{"role": "user", "content": "x"}]}
        assert httpx.post(live.url + "/v1/chat/completions", json=body).status_code == 503
        live.state.start_loading()
        wait_until(lambda: httpx.get(live.url + "/health").status_code == 200, "the model", 120)
        assert httpx.get(live.url + "/v1/models").json()["data"][0]["id"] == "kimi"


def test_on_ready_runs_once_loaded_and_before_any_request_is_served(kimi_dir: Path) -> None:
    # The CLI freezes the loaded model out of the garbage collector's sight here
    # (ember/heap.py): everything the server keeps must exist by then, and no request yet.
    seen: list[tuple[object, str]] = []
    state = ServerState(server_settings(str(kimi_dir)), log=io.StringIO())
    state.on_ready = lambda: seen.append((state.served, state.phase))
    state.start_loading()
    try:
        assert state.wait_loaded(120)
        assert len(seen) == 1 and seen[0][0] is None and not seen[0][1].startswith("ready")
        assert state.served is not None
    finally:
        state.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "ember", "models", "serve", *args],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


def test_cli_prints_progress_and_serves(kimi_dir: Path) -> None:
    port = _free_port()
    process = _serve(
        str(kimi_dir),
        "--port",
        str(port),
        "--kv-cache-bytes",
        "4MiB",
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--torch-threads",
        "1",
        "--served-model-name",
        "tiny",
    )
    try:
        lines = _startup_lines(process, ("ready:", "failed"))
        text = "".join(lines)
        assert f"listening on http://127.0.0.1:{port}" in lines[0]
        assert "loaded DeepseekV3ForCausalLM weights" in text
        assert "KV cache:" in text and "fp8_e4m3" in text
        assert "ready: serving 'tiny'" in lines[-1]
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models").json()
        assert models["data"][0]["id"] == "tiny"
    finally:
        process.terminate()
        process.wait(30)


def test_cli_exits_when_the_model_cannot_load(tmp_path: Path) -> None:
    process = _serve(str(tmp_path), "--port", str(_free_port()))
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "neither a catalog id nor a checkpoint directory" in err
    # Refused before the port is taken and torch and the engine are imported (~2 CPU-seconds,
    # which a model pool pays again on every retry of a replica whose checkpoint is gone).
    assert "listening on" not in err, err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cli_names_a_cuda_device_this_machine_does_not_have(tmp_path: Path) -> None:
    from tests.models.server.checkpoints import checkpoint_dir

    directory = checkpoint_dir("glm4moe-tiny", tmp_path)
    process = _serve(str(directory), "--port", str(_free_port()), "--device", "cuda:1")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "--device: expected cpu: torch" in err and "sees no CUDA device" in err


def _refused(*args: str) -> tuple[int, str, set[str]]:
    """``ember models serve ARGS`` under ``-X importtime``: its exit status, what it printed
    other than the import lines, and the top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ember", "models", "serve", *args],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.splitlines()
    imports = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
    said = "\n".join(line for line in lines if not line.startswith("import time:"))
    return done.returncode, said, {name.split(".")[0] for name in imports}


def test_cli_rejects_bad_flags_before_loading() -> None:
    # Before loading anything, torch included: a typo answers at once, not seconds later.
    code, err, imported = _refused("@cf/moonshotai/kimi-k2.5", "--kv-cache-bytes", "lots")
    assert code != 0 and "--kv-cache-bytes" in err
    assert "torch" not in imported


def test_settings_validation_and_byte_sizes() -> None:
    assert parse_bytes("256MiB") == 256 * 2**20
    assert parse_bytes("1GiB") == 2**30
    assert parse_bytes("2GB") == 2 * 10**9
    assert parse_bytes("4096") == 4096
    for bad in ("0", "-5", "lots", "1XB"):
        with pytest.raises(ConfigError):
            parse_bytes(bad)
    with pytest.raises(ConfigError, match="--chunked-prefill-size"):
        ServerSettings("m", max_running_requests=64, chunked_prefill_size=32)
    with pytest.raises(ConfigError, match="--mem-fraction-static"):
        ServerSettings("m", mem_fraction_static=1.5)
    settings = ServerSettings("m", mem_fraction_static=0.5)
    gib = 2**30
    assert settings.kv_budget(total_bytes=16 * gib, available_after_weights=10 * gib) == 2 * gib
    with pytest.raises(ConfigError, match="nothing for the KV cache"):
        settings.kv_budget(total_bytes=16 * gib, available_after_weights=4 * gib)
    assert ServerSettings("m", kv_cache_bytes=123).kv_budget(16 * gib, 4 * gib) == 123
    # A budget the machine cannot hold fails at start, naming the flag and what is free,
    # instead of loading the weights and dying in the allocator.
    with pytest.raises(ConfigError, match="--kv-cache-bytes") as huge:
        ServerSettings("m", kv_cache_bytes=900 * gib).kv_budget(16 * gib, 4 * gib)
    assert "4.00 GiB" in str(huge.value)


def test_integrity_defaults_to_sampled_on_cpu_and_off_on_cuda() -> None:
    assert ServerSettings("m").integrity == "sampled"
    assert ServerSettings("m", device="cuda:1").integrity == "off"
    assert ServerSettings("m", integrity="full").integrity == "full"
    with pytest.raises(ConfigError, match=r"--integrity.*off \(or auto\) with --device cuda"):
        ServerSettings("m", device="cuda", integrity="sampled")


def test_unbuilt_catalog_model_fails_clearly() -> None:
    """Before the shipped checkpoints exist, a catalog id says so (and after, it loads)."""
    from ember.models.catalog import default_catalog
    from ember.models.server.loading import resolve_source

    entry = default_catalog().get("@cf/zai-org/glm-5.2")
    if entry.is_built:
        source = resolve_source(ServerSettings("@cf/zai-org/glm-5.2"))
        assert source.tool_format == "glm47" and source.context_window is not None
        return
    with pytest.raises(Exception, match="not built yet"):
        resolve_source(ServerSettings("@cf/zai-org/glm-5.2"))


def test_an_sglang_command_line_serves(kimi_dir: Path) -> None:
    """``--model-path`` (sglang.launch_server's name for MODEL), ``--enable-metrics`` and
    ``--trust-remote-code`` are what SGLang's docs put on a Kimi command line; ember used to
    stop at "No such option"."""
    port = _free_port()
    process = _serve(
        "--model-path",
        str(kimi_dir),
        "--port",
        str(port),
        "--kv-cache-bytes",
        "4MiB",
        "--torch-threads",
        "1",
        "--enable-metrics",
        "--trust-remote-code",
    )
    try:
        lines = _startup_lines(process, ("ready:", "rror"))
        assert "ready: serving" in lines[-1], "".join(lines)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.parametrize(
    ("args", "words"),
    [((), "give the model once"), (("a", "--model-path", "b"), "both were given")],
)
def test_the_model_is_given_exactly_once(args: tuple[str, ...], words: str) -> None:
    code, err, imported = _refused(*args)
    assert code == 2 and words in err
    assert "torch" not in imported


def test_a_taken_port_names_the_port_and_what_to_do(kimi_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _serve(str(kimi_dir), "--port", str(port))
        _, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    assert f"ember: error: port {port} on 127.0.0.1 is already in use" in err, err
    assert "--port 0" in err and "Traceback" not in err, err
