"""``ember serve``'s AI line, for the cases a test platform does not start: no ``--config`` at
all, and an install without the AI packages."""

from __future__ import annotations

from pathlib import Path

from ember.cli.serve import _ai_line

MINIMAL = 'ai: {models: {"@cf/zai-org/glm-4.7-flash": {}}}'


def test_without_a_config_file_it_says_to_start_with_one() -> None:
    line = _ai_line([], None)
    assert line.startswith("AI models: none (env.AI.run answers 5007)")
    assert f"start with --config FILE holding {MINIMAL}" in line


def test_it_names_the_served_ids_or_says_ai_is_missing() -> None:
    assert _ai_line(["@cf/a", "@cf/b"], Path("x.yaml")) == "AI models: @cf/a, @cf/b"
    assert "this install has no AI" in _ai_line(None, None)
