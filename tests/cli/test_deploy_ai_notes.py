"""What ``ember deploy`` says about a project's ``ai.models`` mapping, given what the platform
serves (the platform's answer is the seam: ``served_ids`` reads it from a real platform in
tests/platform/test_cli.py)."""

from __future__ import annotations

from ember.cli.deploy_ai import mapping_notes

LLAMA = "@cf/meta/llama-3.1-8b-instruct"
GLM = "@cf/zai-org/glm-4.7-flash"


def test_an_id_the_platform_does_not_serve_is_named_with_what_it_serves() -> None:
    notes = mapping_notes("http://p", [LLAMA, GLM], [GLM])
    assert len(notes) == 1
    assert LLAMA in notes[0] and "5007" in notes[0] and f"It serves: {GLM}" in notes[0]
    assert f"maps {GLM}" not in notes[0]


def test_nothing_is_said_when_the_platform_serves_every_mapped_id() -> None:
    assert mapping_notes("http://p", [GLM], [GLM, LLAMA]) == []
    assert mapping_notes("http://p", [], None) == []


def test_a_platform_that_does_not_list_its_models_gets_the_general_note() -> None:
    (note,) = mapping_notes("http://p", [LLAMA], None)
    assert "ember dev only" in note and LLAMA in note
