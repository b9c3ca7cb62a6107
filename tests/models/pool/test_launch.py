"""The command lines the pool launches: ember model servers and SGLang servers, same knobs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.launch import EMBER_ROOT, ModelSource, family_parsers, launch_command

GLM = "@cf/zai-org/glm-4.7-flash"
KIMI = "@cf/moonshotai/kimi-k2.6"


def _flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


def _source(model: str, family: str, checkpoint: Path | None = None) -> ModelSource:
    tool, reasoning = family_parsers(family, model)
    return ModelSource(model, checkpoint, family, tool, reasoning)


def test_ember_replica_command() -> None:
    (replica,) = (
        parse_pool_config(
            {GLM: {"device": "cuda:1", "kv_cache_dtype": "fp8_e4m3", "quantization": "int4"}}
        )
        .serving(GLM)
        .replicas
    )
    command = launch_command(replica, _source(GLM, "glm"), 31000, python="py")
    argv = command.argv
    # -P: the working directory (a project's, in ember dev) is not on the replica's path.
    assert argv[:7] == ("py", "-P", "-m", "ember", "models", "serve", GLM)
    assert _flag(argv, "--port") == "31000" and _flag(argv, "--host") == "127.0.0.1"
    assert _flag(argv, "--device") == "cuda:1"
    assert _flag(argv, "--kv-cache-dtype") == "fp8_e4m3"
    assert _flag(argv, "--quantization") == "int4"
    assert _flag(argv, "--served-model-name") == GLM
    assert command.env["PYTHONPATH"].split(":")[0] == str(EMBER_ROOT)
    assert command.url == "http://127.0.0.1:31000"


def test_overridden_checkpoint_is_served_under_the_id(tmp_path: Path) -> None:
    (replica,) = parse_pool_config({KIMI: {"max_running_requests": 8}}).serving(KIMI).replicas
    command = launch_command(
        replica, _source(KIMI, "kimi", tmp_path), 31001, python="py", torch_threads=1
    )
    argv = command.argv
    assert argv[6] == str(tmp_path)
    assert _flag(argv, "--served-model-name") == KIMI
    assert _flag(argv, "--tool-call-parser") == "kimi_k2"
    assert _flag(argv, "--max-running-requests") == "8"
    assert _flag(argv, "--torch-threads") == "1"


def test_sglang_replica_command(tmp_path: Path) -> None:
    config = parse_pool_config(
        {
            KIMI: {
                "backend": "sglang",
                "device": "cuda:4,5,6,7",
                "kv_cache_dtype": "fp8_e4m3",
                "quantization": "w4afp8",
                "args": ["--mem-fraction-static", 0.85],
                "checkpoint": str(tmp_path),
            }
        }
    )
    (replica,) = config.serving(KIMI).replicas
    command = launch_command(replica, _source(KIMI, "kimi", tmp_path), 30000, python="py")
    argv = command.argv
    assert argv[:3] == ("py", "-m", "sglang.launch_server")
    assert _flag(argv, "--model-path") == str(tmp_path)
    assert _flag(argv, "--tp") == "4"
    assert _flag(argv, "--kv-cache-dtype") == "fp8_e4m3"
    assert _flag(argv, "--quantization") == "w4afp8"
    assert _flag(argv, "--tool-call-parser") == "kimi_k2"
    assert _flag(argv, "--reasoning-parser") == "kimi_k2"
    assert _flag(argv, "--served-model-name") == KIMI
    assert _flag(argv, "--mem-fraction-static") == "0.85"
    assert "--trust-remote-code" in argv
    assert command.env == {"PYTHONSAFEPATH": "1", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7 py -m sglang.launch_server" in command.shell()


@pytest.mark.parametrize("backend", ["ember", "sglang"])
def test_a_project_folder_never_shadows_what_a_replica_imports(
    backend: str, tmp_path: Path
) -> None:
    """A replica started from a project's folder (ember dev's working directory) that holds a
    module of the name it runs (``sglang/``, ``ember/``) imports the installed one, not the
    project's: run the command's interpreter flags and environment on a module that exists only
    in the working directory."""
    (tmp_path / "shadowing.py").write_text("print('imported from the working directory')\n")
    config = parse_pool_config({GLM: {"backend": backend, "model_path": str(tmp_path)}})
    (replica,) = config.serving(GLM).replicas
    command = launch_command(replica, _source(GLM, "glm", tmp_path), 30000)
    flags = command.argv[1 : command.argv.index("-m")]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(command.env)
    done = subprocess.run(
        [sys.executable, *flags, "-m", "shadowing"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "imported from the working directory" not in done.stdout
    assert "No module named shadowing" in done.stderr


def test_sglang_parsers_follow_the_glm_version() -> None:
    assert family_parsers("glm", "@cf/zai-org/glm-4.7-flash") == ("glm47", "glm45")
    assert family_parsers("glm", "@cf/zai-org/glm-4.6") == ("glm45", "glm45")
    assert family_parsers("kimi", KIMI) == ("kimi_k2", "kimi_k2")


def test_sglang_model_path_overrides_the_checkpoint(tmp_path: Path) -> None:
    (replica,) = (
        parse_pool_config({GLM: {"backend": "sglang", "model_path": "/models/GLM-4.7-FP8"}})
        .serving(GLM)
        .replicas
    )
    argv = launch_command(replica, _source(GLM, "glm", tmp_path), 30000).argv
    assert _flag(argv, "--model-path") == "/models/GLM-4.7-FP8"
    assert "--trust-remote-code" not in argv
