"""The training corpus: the running interpreter's standard-library sources, split by file.

Every machine that runs ember has a Python standard library, so it is the one corpus that needs
no download. Which files take part, and which of them are held out, is decided by rules that
depend only on a file's path (and, for generated noise, its text), never on the machine:

* every ``*.py`` under ``sysconfig.get_paths()["stdlib"]``, walked in sorted order;
* minus directories that are not library code or are noisy: test suites (``test``, ``tests``,
  ``idle_test``), ``site-packages``/``dist-packages``, ``idlelib``, ``turtledemo``, ``lib2to3``
  (deprecated, with intentionally broken test data), ``ensurepip``, ``pydoc_data`` (one 700 kB
  string of prose), ``lib-dynload`` and ``config-*`` (build artefacts), ``__pycache__``;
* minus machine-specific or generated files: ``_sysconfigdata_*``, ``__phello__``/``__hello__``,
  ``this.py`` (rot13 prose), and the ``encodings`` codecs that are generated character-map
  tables (they define a ``decoding_table``);
* minus files that are not UTF-8, smaller than ``MIN_BYTES`` or larger than ``MAX_BYTES``;
* minus exact duplicates (the first path in sorted order keeps the content).

A file is held out when a hash of its *relative path* falls in the held-out bucket, so the split is
stable across Python patch versions (a file's bytes may change; its side never does). The held-out
texts are committed beside the checkpoints (``heldout.json``) and the training files are recorded
with their SHA-256 (``train-manifest.json``), so evaluation reads identical bytes everywhere and the
training set is reproducible and provably disjoint from the held-out set.
"""

from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ember.errors import CheckpointError

SPLIT_SALT = "ember-stdlib-heldout-v1"
HELDOUT_PER_MILLE = 35  # about 3.5 % of the files
MIN_BYTES = 200
MAX_BYTES = 400_000

EXCLUDED_DIRS = frozenset(
    {
        "test",
        "tests",
        "idle_test",
        "site-packages",
        "dist-packages",
        "idlelib",
        "turtledemo",
        "lib2to3",
        "ensurepip",
        "pydoc_data",
        "lib-dynload",
        "__pycache__",
    }
)
EXCLUDED_FILE_PREFIXES = ("_sysconfigdata_", "__phello__", "__hello__")
EXCLUDED_FILES = frozenset({"this.py"})
GENERATED_CODEC_MARKER = "decoding_table"


class CorpusMismatch(CheckpointError):
    """The local standard library differs from the one the checkpoints were trained on."""


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One corpus file: its path relative to the stdlib root, its text and the text's SHA-256."""

    path: str
    text: str
    sha256: str

    @property
    def num_bytes(self) -> int:
        return len(self.text.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class CorpusSplit:
    """The corpus divided by file into a training part and a held-out part."""

    python_version: str
    train: tuple[SourceFile, ...]
    heldout: tuple[SourceFile, ...]


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_heldout(relpath: str) -> bool:
    """Which side of the split a path falls on; depends on nothing but the path."""
    digest = hashlib.sha256(f"{SPLIT_SALT}:{relpath}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 1000 < HELDOUT_PER_MILLE


def _path_is_excluded(relparts: tuple[str, ...]) -> bool:
    *dirs, name = relparts
    if any(d in EXCLUDED_DIRS or d.startswith("config-") for d in dirs):
        return True
    return name in EXCLUDED_FILES or name.startswith(EXCLUDED_FILE_PREFIXES)


def _text_is_excluded(relparts: tuple[str, ...], text: str) -> bool:
    if relparts[0] == "encodings" and GENERATED_CODEC_MARKER in text:
        return True
    size = len(text.encode("utf-8"))
    return size < MIN_BYTES or size > MAX_BYTES


def collect_sources(root: Path | None = None) -> list[SourceFile]:
    """All corpus files under ``root`` (default: this interpreter's stdlib), sorted by path."""
    root = root or stdlib_root()
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.is_file())
    seen: set[str] = set()
    out: list[SourceFile] = []
    for rel in paths:
        parts = tuple(rel.split("/"))
        if _path_is_excluded(parts):
            continue
        try:
            text = (root / rel).read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        if _text_is_excluded(parts, text):
            continue
        digest = sha256_text(text)
        if digest in seen:
            continue
        seen.add(digest)
        out.append(SourceFile(path=rel, text=text, sha256=digest))
    return out


def split_sources(files: Iterable[SourceFile]) -> CorpusSplit:
    files = list(files)
    return CorpusSplit(
        python_version=".".join(map(str, sys.version_info[:3])),
        train=tuple(f for f in files if not is_heldout(f.path)),
        heldout=tuple(f for f in files if is_heldout(f.path)),
    )


def build_split(root: Path | None = None) -> CorpusSplit:
    return split_sources(collect_sources(root))


# ---------------------------------------------------------------------------------------------
# The two committed records: the training manifest (paths + hashes) and the held-out texts.


def byte_counts(files: Iterable[SourceFile]) -> list[int]:
    """How often each byte value occurs in the files' UTF-8 text (for the unigram baseline)."""
    counts = [0] * 256
    for f in files:
        data = f.text.encode("utf-8")
        for value in range(256):
            counts[value] += data.count(value)
    return counts


def _record_header(split: CorpusSplit) -> dict[str, object]:
    return {
        "format": "ember-stdlib-corpus-v1",
        "python_version": split.python_version,
        "split_salt": SPLIT_SALT,
        "heldout_per_mille": HELDOUT_PER_MILLE,
    }


def write_records(split: CorpusSplit, train_manifest: Path, heldout: Path) -> None:
    header = _record_header(split)
    manifest = {
        **header,
        "num_files": len(split.train),
        "num_bytes": sum(f.num_bytes for f in split.train),
        "byte_counts": byte_counts(split.train),
        "files": [{"path": f.path, "sha256": f.sha256, "bytes": f.num_bytes} for f in split.train],
    }
    held = {
        **header,
        "num_files": len(split.heldout),
        "num_bytes": sum(f.num_bytes for f in split.heldout),
        "files": [{"path": f.path, "sha256": f.sha256, "text": f.text} for f in split.heldout],
    }
    train_manifest.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    heldout.write_text(json.dumps(held, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def load_heldout(path: Path) -> tuple[SourceFile, ...]:
    """The committed held-out texts, each checked against its recorded hash."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the held-out corpus ({exc})") from exc
    files = []
    for entry in data["files"]:
        if sha256_text(entry["text"]) != entry["sha256"]:
            raise CheckpointError(f"{path}: held-out text of {entry['path']} fails its sha256")
        files.append(SourceFile(path=entry["path"], text=entry["text"], sha256=entry["sha256"]))
    return tuple(files)


def load_manifest(path: Path) -> dict[str, object]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot read the training manifest ({exc})") from exc


def verify_training_files(split: CorpusSplit, manifest_path: Path) -> list[str]:
    """Differences between the local training files and the recorded ones (empty: identical)."""
    recorded = {e["path"]: e["sha256"] for e in load_manifest(manifest_path)["files"]}  # type: ignore[index]
    local = {f.path: f.sha256 for f in split.train}
    problems = [f"missing locally: {p}" for p in sorted(recorded.keys() - local.keys())]
    problems += [f"not in the manifest: {p}" for p in sorted(local.keys() - recorded.keys())]
    problems += [
        f"different bytes: {p}"
        for p in sorted(recorded.keys() & local.keys())
        if recorded[p] != local[p]
    ]
    return problems
