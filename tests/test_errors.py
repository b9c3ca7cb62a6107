"""The exception tree is one tree, drawn in its docstring."""

from __future__ import annotations

import inspect

import ember.errors as errors


def test_every_error_class_descends_from_ember_error_and_is_drawn() -> None:
    classes = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if obj.__module__ == errors.__name__
    ]
    assert classes
    for cls in classes:
        assert issubclass(cls, errors.EmberError)
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} missing from the tree"


def test_config_error_names_file_key_found_and_expected() -> None:
    expected = "a cron string like '*/5 * * * *'"
    exc = errors.ConfigError("ember.yaml", "triggers.crons[0]", 5, expected)
    text = str(exc)
    assert "ember.yaml" in text and "triggers.crons[0]" in text and "5" in text
    assert "cron string" in text
