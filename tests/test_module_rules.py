"""Module rules: which files of a Worker are modules, and of which type, as wrangler decides.

wrangler's default rules (workers-sdk ``packages/wrangler/src/deployment-bundle/rules.ts``,
``DEFAULT_MODULE_RULES``), the ``PythonModule`` rule it adds for a ``.py`` entry
(``packages/workers-utils/src/config/validation.ts``, ``applyPythonConfig``), the shadowing of a
later rule by an earlier one of the same type (``parseRules``), and globs matched as
``glob-to-regexp`` with ``globstar`` matches them (``find-additional-modules.ts``,
``matchFiles``).
"""

from __future__ import annotations

import pytest

from ember.errors import ConfigError
from ember.module_rules import ModuleRule, glob_matches, parse_rules, rules_value


@pytest.mark.parametrize(
    ("glob", "name", "matches"),
    [
        ("**/*.md", "notes.md", True),
        ("**/*.md", "docs/deep/notes.md", True),
        ("**/*.md", "notes.mdx", False),
        ("*.md", "docs/notes.md", False),  # one star never crosses a "/"
        ("templates/*", "templates/page.html", True),
        ("templates/*", "templates/a/page.html", False),
        ("**/*.wasm?module", "a.wasm?module", True),  # "?" is literal, as wrangler has it
        ("**/*.wasm?module", "a.wasmXmodule", False),
        ("data.[ch]", "data.c", False),  # no character classes either
        ("**/*.txt", ".hidden.txt", True),
    ],
)
def test_globs_match_as_wrangler_matches_them(glob: str, name: str, matches: bool) -> None:
    assert glob_matches(glob, name) is matches


def test_python_entry_rules_follow_the_config_rules_then_the_defaults() -> None:
    user = (ModuleRule("Text", ("**/*.md",), fallthrough=True),)
    rules, warnings = parse_rules(user)
    assert [(r.type, r.globs) for r in rules] == [
        ("Text", ("**/*.md",)),
        ("PythonModule", ("**/*.py",)),
        ("Text", ("**/*.txt", "**/*.html", "**/*.sql")),
        ("Data", ("**/*.bin",)),
        ("CompiledWasm", ("**/*.wasm", "**/*.wasm?module")),
    ]
    assert warnings == ()


def test_a_rule_without_fallthrough_shadows_the_default_of_its_type_with_a_warning() -> None:
    rules, warnings = parse_rules((ModuleRule("Text", ("**/*.md",)),))
    assert [r.type for r in rules] == ["Text", "PythonModule", "Data", "CompiledWasm"]
    assert len(warnings) == 1
    assert "does not have a fallback, the following rules will be ignored" in warnings[0]
    assert '"**/*.txt"' in warnings[0] and "(DEFAULT)" in warnings[0]
    # fallthrough = false shadows it too, silently
    rules, warnings = parse_rules((ModuleRule("Text", ("**/*.md",), fallthrough=False),))
    assert [r.type for r in rules] == ["Text", "PythonModule", "Data", "CompiledWasm"]
    assert warnings == ()


def test_rules_are_read_as_wrangler_writes_them() -> None:
    value = [
        {"type": "Text", "globs": ["**/*.md"], "fallthrough": True},
        {"type": "Data", "globs": ["**/*.dat"]},
    ]
    assert rules_value(value, "wrangler.toml") == (
        ModuleRule("Text", ("**/*.md",), True),
        ModuleRule("Data", ("**/*.dat",), None),
    )
    assert rules_value(None, "wrangler.toml") == ()


@pytest.mark.parametrize(
    ("value", "key", "expected"),
    [
        ({"type": "Text"}, "rules", "a list of rules"),
        (["**/*.md"], "rules[0]", "a rule"),
        ([{"globs": ["**/*.md"]}], "rules[0].type", "one of ESModule, CommonJS"),
        ([{"type": "Markdown", "globs": ["*.md"]}], "rules[0].type", "one of ESModule"),
        ([{"type": "PythonModule", "globs": ["*.py"]}], "rules[0].type", "one of ESModule"),
        ([{"type": "Text"}], "rules[0].globs", "a non-empty list of globs"),
        ([{"type": "Text", "globs": "**/*.md"}], "rules[0].globs", "a non-empty list of globs"),
        ([{"type": "Text", "globs": []}], "rules[0].globs", "a non-empty list of globs"),
        ([{"type": "Text", "globs": [""]}], "rules[0].globs[0]", "a glob relative to"),
        ([{"type": "Text", "globs": ["/etc/*.md"]}], "rules[0].globs[0]", "a glob relative to"),
        ([{"type": "Text", "globs": ["../*.md"]}], "rules[0].globs[0]", "a glob relative to"),
        ([{"type": "Text", "globs": ["*.md"], "fallthrough": "yes"}], "rules[0].fallthrough",
         "true or false"),
    ],
)  # fmt: skip
def test_a_malformed_rule_is_a_config_error_naming_it(
    value: object, key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        rules_value(value, "wrangler.toml")
    assert (caught.value.file, caught.value.key) == ("wrangler.toml", key)
    assert caught.value.expected.startswith(expected)
