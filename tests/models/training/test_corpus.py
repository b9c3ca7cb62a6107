"""The stdlib corpus: selection rules, a split by file that never leaks, committed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.errors import CheckpointError
from ember.models.training import corpus
from ember.models.training.pipeline import HELDOUT, TRAIN_MANIFEST


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_selection_rules_on_a_synthetic_stdlib(tmp_path: Path) -> None:
    body = "x = 1\n" * 60
    _write(tmp_path, "keep.py", body)
    _write(tmp_path, "pkg/mod.py", body + "# other\n")
    _write(tmp_path, "pkg/dup.py", body)  # same bytes as keep.py: dropped
    _write(tmp_path, "test/test_x.py", body + "# t\n")
    _write(tmp_path, "pkg/tests/t.py", body + "# tt\n")
    _write(tmp_path, "idlelib/x.py", body + "# i\n")
    _write(tmp_path, "site-packages/y.py", body + "# s\n")
    _write(tmp_path, "_sysconfigdata__linux.py", body + "# c\n")
    _write(tmp_path, "encodings/cp1.py", body + "decoding_table = ()\n")
    _write(tmp_path, "encodings/utf_9.py", body + "# codec\n")
    _write(tmp_path, "tiny.py", "x = 1\n")
    (tmp_path / "latin1.py").write_bytes(b"# \xe9\n" + body.encode())
    paths = [f.path for f in corpus.collect_sources(tmp_path)]
    assert paths == ["encodings/utf_9.py", "keep.py", "pkg/mod.py"]


def test_split_depends_only_on_the_path() -> None:
    assert [
        corpus.is_heldout(p) for p in ("fractions.py", "uuid.py", "os.py", "json/decoder.py")
    ] == [
        True,
        True,
        False,
        False,
    ]


def test_committed_records_are_disjoint_and_hash_checked() -> None:
    manifest = json.loads(TRAIN_MANIFEST.read_text(encoding="utf-8"))
    heldout = corpus.load_heldout(HELDOUT)
    train_paths = {e["path"] for e in manifest["files"]}
    train_hashes = {e["sha256"] for e in manifest["files"]}
    assert len(train_paths) == manifest["num_files"] > 400
    assert len(heldout) >= 15 and sum(f.num_bytes for f in heldout) > 300_000
    assert not train_paths & {f.path for f in heldout}
    assert not train_hashes & {f.sha256 for f in heldout}
    assert all(corpus.is_heldout(f.path) for f in heldout)
    assert not any(corpus.is_heldout(p) for p in train_paths)


def test_tampered_heldout_text_is_refused(tmp_path: Path) -> None:
    data = json.loads(HELDOUT.read_text(encoding="utf-8"))
    data["files"][0]["text"] += " "
    bad = tmp_path / "heldout.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CheckpointError, match="sha256"):
        corpus.load_heldout(bad)


def test_local_stdlib_matches_the_manifest_or_says_why() -> None:
    split = corpus.build_split()
    problems = corpus.verify_training_files(split, TRAIN_MANIFEST)
    manifest = json.loads(TRAIN_MANIFEST.read_text(encoding="utf-8"))
    if split.python_version != manifest["python_version"]:
        pytest.skip(f"stdlib {split.python_version} != recorded {manifest['python_version']}")
    assert problems == []
    assert [f.path for f in split.heldout] == [f.path for f in corpus.load_heldout(HELDOUT)]
