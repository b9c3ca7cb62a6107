from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.models.server.checkpoints import checkpoint_dir
from tests.models.server.live import LiveServer, running_server, serve_process, server_settings


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("checkpoints")


@pytest.fixture(scope="session")
def kimi_dir(checkpoints: Path) -> Path:
    return checkpoint_dir("kimi-tiny", checkpoints)


@pytest.fixture(scope="session")
def glm_dir(checkpoints: Path) -> Path:
    return checkpoint_dir("glm4moe-tiny", checkpoints)


@pytest.fixture(scope="module")
def kimi(kimi_dir: Path) -> Iterator[LiveServer]:
    """kimi-tiny (MLA) served as "kimi" with FP8 KV and sampled integrity checks."""
    settings = server_settings(str(kimi_dir), served_model_name="kimi", kv_cache_dtype="fp8_e4m3")
    with running_server(settings) as live:
        yield live


@pytest.fixture(scope="module")
def glm(glm_dir: Path) -> Iterator[LiveServer]:
    """glm4moe-tiny (GQA) served as "glm" with BF16 KV."""
    with running_server(server_settings(str(glm_dir), served_model_name="glm")) as live:
        yield live


@pytest.fixture(scope="session")
def kimi_process(kimi_dir: Path) -> Iterator[str]:
    """kimi-tiny served as "kimi" by a real ``ember models serve`` subprocess, one request
    running at a time (so that a second one waits); yields its URL."""
    with serve_process(
        str(kimi_dir),
        "--served-model-name",
        "kimi",
        "--kv-cache-bytes",
        "16MiB",
        "--max-running-requests",
        "1",
        "--torch-threads",
        "1",
    ) as url:
        yield url
