"""The isolate half stays light: importing the AI client loads neither the pool nor torch."""

from __future__ import annotations

import subprocess
import sys

from tests.bindings.ai.support import ROOT

HEAVY = ("ember.models", "ember.bindings.ai.gateway", "httpx", "torch", "starlette")


def test_client_import_loads_nothing_heavy() -> None:
    code = (
        "import sys, ember.bindings.ai.client\n"
        f"heavy = [m for m in sys.modules if m.startswith({HEAVY!r})]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


def test_the_registry_finds_the_ai_binding_type() -> None:
    from ember.bindings.registry import default_registry

    ai = default_registry().by_kind("ai")
    assert ai.service == "ember.bindings.ai.service:AIService"
    assert ai.http == "ember.bindings.ai.dev_mount:dev_mount"
