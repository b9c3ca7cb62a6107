"""The default isolate cap reads the memory ember may use: a container's cgroup limit (v1 or
v2) when it is below the machine's RAM, as in a Docker container started with ``--memory``."""

from __future__ import annotations

from pathlib import Path

from ember.runtime.capacity import BYTES_PER_ISOLATE, MIN_DEFAULT_ISOLATES, usable_memory

GIB = 1 << 30


def _tree(tmp_path: Path, cgroup_lines: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    listing = tmp_path / "self-cgroup"
    listing.write_text(cgroup_lines)
    return root, listing


def test_a_v2_limit_below_the_ram_is_what_counts(tmp_path: Path) -> None:
    root, listing = _tree(tmp_path, "0::/box\n", {"box/memory.max": f"{2 * GIB}\n"})
    assert usable_memory(64 * GIB, root, listing) == 2 * GIB
    assert (2 * GIB) // BYTES_PER_ISOLATE == 8 >= MIN_DEFAULT_ISOLATES


def test_a_v1_limit_counts_and_unlimited_ones_do_not(tmp_path: Path) -> None:
    v1 = "9:memory:/docker/abc\n8:pids:/\n"
    root, listing = _tree(tmp_path, v1, {"memory/docker/abc/memory.limit_in_bytes": f"{GIB}"})
    assert usable_memory(64 * GIB, root, listing) == GIB
    unlimited = {"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712"}
    root, listing = _tree(tmp_path / "u", v1, unlimited)
    assert usable_memory(64 * GIB, root, listing) == 64 * GIB
    root, listing = _tree(tmp_path / "m", "0::/\n", {"memory.max": "max\n"})
    assert usable_memory(64 * GIB, root, listing) == 64 * GIB


def test_no_cgroup_files_leave_the_ram(tmp_path: Path) -> None:
    assert usable_memory(8 * GIB, tmp_path / "none", tmp_path / "none-either") == 8 * GIB
