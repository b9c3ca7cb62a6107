"""Hostile or mistyped ember.yaml: every way a YAML file can fail to load is a ConfigError that
names the file (and the key or line where there is one), never PyYAML's or Python's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.config import load_project
from ember.errors import ConfigError

HEAD = "name: app\nmain: worker.py\n"


def _load(tmp_path: Path, text: str | bytes) -> object:
    (tmp_path / "worker.py").write_text("")
    path = tmp_path / "ember.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return load_project(tmp_path)


def _error(tmp_path: Path, text: str | bytes) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert str(tmp_path / "ember.yaml") in str(info.value)
    return info.value


@pytest.mark.parametrize("date", ["2026-13-01", "2026-02-30", "2026-00-10", "2026-1-32"])
def test_an_impossible_unquoted_date_names_the_key(tmp_path: Path, date: str) -> None:
    error = _error(tmp_path, f"{HEAD}compatibility_date: {date}\n")
    assert error.key == "compatibility_date" and error.found == date
    assert "YYYY-MM-DD" in error.expected


def test_an_impossible_unquoted_datetime_names_the_key(tmp_path: Path) -> None:
    error = _error(tmp_path, f"{HEAD}compatibility_date: 2026-01-01 25:61:00\n")
    assert error.key == "compatibility_date"


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("2026-13-01", "2026-13-01"),  # as written: not a date, so the string the user typed
        ("2026-02-30", "2026-02-30"),
        ("2026-01-02", "2026-01-02"),
        ("9" * 5000, "9" * 5000),  # past Python's int-from-text limit: kept as its text
    ],
)
def test_a_var_the_resolver_cannot_build_is_its_text(
    tmp_path: Path, written: str, value: str
) -> None:
    config = _load(tmp_path, f"{HEAD}vars:\n  RELEASE: {written}\n")
    assert config.vars["RELEASE"] == value  # type: ignore[attr-defined]


def test_a_nan_var_is_refused_as_not_json(tmp_path: Path) -> None:
    error = _error(tmp_path, f"{HEAD}vars:\n  RATIO: .nan\n")
    assert error.key == "vars.RATIO"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f"{HEAD}name: other\n", ["duplicate key 'name'", "line 3"]),
        (f"{HEAD}vars:\n  A: 1\n  A: 2\n", ["duplicate key 'A'", "line 5"]),
        (f"{HEAD}x: !!python/object:os.system {{}}\n", ["python/object"]),
        (f"{HEAD}x: !!python/name:os.system ''\n", ["python/name"]),
        ("- name: app\n- main: worker.py\n", ["list", "mapping"]),
        ("just a string\n", ["str", "mapping"]),
        (b"name: app\nmain: \xff\xfe\n", ["UTF-8"]),
        (b"name: app\x00\nmain: worker.py\n", ["special characters"]),
        (f"{HEAD}---\nname: again\n", ["single document"]),
        (f"{HEAD}vars: *nowhere\n", ["alias"]),
        (f"{HEAD}vars:\n  X: &a [*a]\n", ["recursive"]),
        (f"{HEAD}vars: {'[' * 5000}{']' * 5000}\n", ["deep"]),
        (f"{HEAD}? [a, b]\n: 1\n", ["unhashable"]),
        (f"{HEAD}compatibility_date: !!timestamp nonsense\n", ["compatibility_date", "nonsense"]),
        (f"{HEAD}limits:\n  cpu_ms: {'9' * 5000}\n", ["limits.cpu_ms"]),
    ],
)
def test_every_malformed_document_is_a_config_error(
    tmp_path: Path, text: str | bytes, words: list[str]
) -> None:
    message = str(_error(tmp_path, text))
    for word in words:
        assert word in message, message


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    text = f"{HEAD}base: &base {{A: 1, B: 2}}\nvars:\n  <<: *base\n  B: 3\n"
    config = _load(tmp_path, text)
    assert config.vars == {"A": 1, "B": 3}  # type: ignore[attr-defined]


def test_billion_laughs_is_refused_before_it_expands(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    text = HEAD + "\n".join(lines) + "\nvars:\n  BOOM: *a9\n"
    message = str(_error(tmp_path, text))
    assert "alias" in message


def test_a_few_anchors_still_load(tmp_path: Path) -> None:
    text = f"{HEAD}shared: &shared hello\nvars:\n  A: *shared\n  B: *shared\n"
    assert _load(tmp_path, text).vars == {"A": "hello", "B": "hello"}  # type: ignore[attr-defined]
