"""Mistakes in the ``ai:`` section of ``ember serve --config``: one line naming the file and the
key, before anything starts; and the README's project ``ai:`` section pasted in is accepted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.conftest import BASE_CONFIG, ROOT, ServeProcess


def _serve(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "platform.yaml"
    file.write_text(BASE_CONFIG + config)
    return subprocess.run(
        [sys.executable, "-m", "ember", "serve", "--port", "0", "--state-dir",
         str(tmp_path / "state"), "--config", str(file)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )  # fmt: skip


def test_an_id_no_catalog_knows_names_the_file_and_key_and_suggests_checkpoint(
    tmp_path: Path,
) -> None:
    result = _serve(tmp_path, 'ai:\n  models:\n    "@cf/acme/not-a-model":\n      replicas: 1\n')
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "SystemExit" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f'ember: error: {tmp_path / "platform.yaml"}: ai.models."@cf/acme/not-a-model"'
    )
    assert "checkpoint:" in line, line


def test_an_sglang_replica_without_checkpoint_or_model_path_is_refused_at_start(
    tmp_path: Path,
) -> None:
    config = 'ai:\n  models:\n    "@cf/moonshotai/kimi-k2.6":\n      backend: sglang\n'
    result = _serve(tmp_path, config)
    assert result.returncode == 1, result.stderr
    assert 'ai.models."@cf/moonshotai/kimi-k2.6".checkpoint' in result.stderr, result.stderr
    assert "model_path" in result.stderr and "Traceback" not in result.stderr


def test_the_projects_binding_key_is_accepted_with_a_note(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    serve = ServeProcess(
        tmp_path_factory.mktemp("binding") / "state", BASE_CONFIG + "ai:\n  binding: AI\n"
    )
    try:
        assert "ai.binding" in serve.output() and "ignored" in serve.output(), serve.output()
    finally:
        serve.stop()
