"""The protocol layer and the grammar matcher import without torch (the AI binding in the
supervisor validates requests with them)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODULES = [
    "ember.models.api.chat_request",
    "ember.models.api.completion_request",
    "ember.models.api.constraints",
    "ember.models.api.responses",
    "ember.models.api.sse",
    "ember.models.api.errors",
    "ember.models.constrain.session",
]


def test_api_and_matcher_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in MODULES)
        + (
            "heavy = ('torch', 'transformers', 'tokenizers', 'numpy')\n"
            "heavy = [m for m in heavy if m in sys.modules]\n"
            "assert not heavy, heavy\n"
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
