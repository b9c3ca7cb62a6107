"""``requires-python`` against the interpreter that runs workers.

Cloudflare's Python Workers run Python 3.12 or newer (Pyodide); ember runs workers on the
interpreter it is installed in. A project that asks for a Python ember is not running gets a
warning at start naming both. The evaluator is checked against ``packaging`` (a test-only
oracle here) on random specifiers.
"""

from __future__ import annotations

import random

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ember.requires_python import allows, python_mismatch

OPERATORS = ("==", "!=", ">=", "<=", ">", "<", "~=")


def _random_specifier(rng: random.Random) -> str:
    clauses = []
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(OPERATORS)
        parts = [3, rng.randint(8, 14), rng.randint(0, 12)][
            : rng.randint(2 if op == "~=" else 1, 3)
        ]
        version = ".".join(map(str, parts))
        if op in ("==", "!=") and len(parts) < 3 and rng.random() < 0.5:
            version += ".*"
        clauses.append(f"{op}{rng.choice(['', ' '])}{version}")
    return rng.choice([",", ", "]).join(clauses)


def test_allows_matches_packaging_on_random_specifiers() -> None:
    rng = random.Random(695)
    for _ in range(3000):
        spec = _random_specifier(rng)
        version = (3, rng.randint(8, 14), rng.randint(0, 12))
        expected = Version(".".join(map(str, version))) in SpecifierSet(spec)
        assert allows(spec, version) is expected, (spec, version)


@pytest.mark.parametrize("spec", ["", "python>=3", ">=3.12a1", ">=three", "=>3.12", "~=3"])
def test_a_specifier_it_cannot_read_is_a_value_error(spec: str) -> None:
    with pytest.raises(ValueError):
        allows(spec, (3, 11, 7))


def test_the_warning_names_both_versions_and_what_breaks() -> None:
    warning = python_mismatch(">=3.12", (3, 11, 7))
    assert warning is not None
    assert "requires-python '>=3.12'" in warning and "Python 3.11.7" in warning
    assert "PEP 695" in warning and "itertools.batched" in warning
    assert python_mismatch(">=3.11", (3, 11, 7)) is None
    assert python_mismatch(None, (3, 11, 7)) is None
    assert python_mismatch("not a specifier", (3, 11, 7)) is None
