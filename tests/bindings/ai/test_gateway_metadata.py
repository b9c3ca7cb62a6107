"""AI Gateway metadata as the platform keeps it, and a log's head flags counted in bytes."""

from __future__ import annotations

import json

import pytest

from ember.bindings.ai.answer import AIAnswer
from ember.bindings.ai.gateway_logs import HEAD_CHARS, GatewayLogs
from ember.bindings.ai.gateway_metadata import MAX_TEXT, gateway_metadata
from ember.bindings.ai.options import parse_run_options
from ember.errors import InvalidModelInput

M = "@cf/zai-org/glm-4.7-flash"


def test_only_the_first_five_entries_are_kept_as_on_the_platform() -> None:
    sent = {f"k{i}": i for i in range(8)}
    assert gateway_metadata(sent, "/m") == {f"k{i}": i for i in range(5)}
    options = parse_run_options({"gateway": {"id": "g", "metadata": sent}}, M)
    assert options.gateway is not None and len(options.gateway.metadata) == 5


@pytest.mark.parametrize("bad", [{"user": {"id": 1}}, {"tags": [1, 2]}, {"k": "v" * 1_200_000}])
def test_objects_and_oversized_values_are_refused_naming_the_entry(bad: dict) -> None:
    with pytest.raises(InvalidModelInput) as refused:
        gateway_metadata(bad, "/options/gateway/metadata")
    assert refused.value.field == f"/options/gateway/metadata/{next(iter(bad))}"
    logs = GatewayLogs()
    log = logs.start("g", M, {"prompt": "x"}, {})
    with pytest.raises(InvalidModelInput):
        logs.patch(log, {"metadata": bad})
    assert gateway_metadata({"ok": "v" * MAX_TEXT, "n": 1.5, "b": True}, "/m")["b"] is True


def test_head_flags_compare_bytes_with_bytes() -> None:
    logs = GatewayLogs()
    log = logs.start("g", M, {"prompt": "héllo wörld"}, {})  # non-ASCII, short
    logs.answered("t", log, AIAnswer("r", 200, {}, json.dumps({"r": "é"}).encode()), keep=True)
    shown = log.as_json()
    assert shown["request_head_complete"] is True and shown["response_head_complete"] is True
    long = logs.start("g", M, {"prompt": "é" * HEAD_CHARS}, {})
    logs.answered("t", long, AIAnswer("r", 200, {}, b"x" * (HEAD_CHARS + 1)), keep=True)
    shown = long.as_json()
    assert shown["request_head_complete"] is False and shown["response_head_complete"] is False
