"""The fields a request carried that nothing read: vLLM's "present in the request but ignored"
log line, top-level keys and the keys of ``structured_outputs`` (whose sub-keys such as
``disable_any_whitespace`` change what vLLM generates, so ignoring one must be visible)."""

from __future__ import annotations

from ember.models.api.read_fields import ignored_note, tracked


def test_unread_top_level_keys_are_named() -> None:
    body = tracked({"model": "m", "priority": 1, "zeta": 2})
    assert isinstance(body, dict)
    body.get("model")
    assert ignored_note(body) == "fields present in the request but ignored: priority, zeta"


def test_structured_outputs_sub_keys_ember_does_not_honour_are_named() -> None:
    body = tracked(
        {
            "structured_outputs": {
                "choice": ["a", "b"],
                "disable_any_whitespace": True,
                "whitespace_pattern": " ",
            }
        }
    )
    assert isinstance(body, dict)
    body.get("structured_outputs")  # the guided-fields parser reads it
    assert ignored_note(body) == (
        "fields present in the request but ignored: "
        "structured_outputs.disable_any_whitespace, structured_outputs.whitespace_pattern"
    )
    quiet = tracked({"structured_outputs": {"json": {}, "regex": "a"}})
    assert isinstance(quiet, dict)
    quiet.get("structured_outputs")
    assert ignored_note(quiet) is None
