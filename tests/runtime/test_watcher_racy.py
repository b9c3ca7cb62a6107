"""The watcher's racily-clean rules: a stat that cannot be trusted yet is checked again, and one
that can is trusted, so a poll walks the tree only while something may have moved unseen.

The clock is the watcher's own (a typed seam): the tests move it past the racy window instead
of sleeping, and count walks, never time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ember.config import load_project
from ember.runtime import watcher as watcher_module
from ember.runtime.dev_watch import dev_watch_list
from ember.runtime.racy import digest
from ember.runtime.watcher import (
    RACY_NS,
    REQUEST_READ_MAX,
    REQUEST_READS,
    FileWatcher,
    WatchList,
)

HOUR = 3600 * 10**9


class Clock:
    """Real time until moved on by hand."""

    def __init__(self) -> None:
        self.now = time.time_ns()

    def __call__(self) -> int:
        return self.now


def _project(tmp_path: Path, dirs: int = 3) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    (root / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    (root / "worker.py").write_text("one")
    for d in range(dirs):
        (root / "pkg" / f"d{d}").mkdir(parents=True)
        (root / "pkg" / f"d{d}" / "m.py").write_text("x")
    return root


def _date(root: Path, when_ns: int) -> None:
    """Date the project's files and folders at ``when_ns``."""
    for path in [*root.rglob("*"), root]:
        os.utime(path, ns=(when_ns, when_ns))


def _counting(root: Path) -> tuple[list[int], FileWatcher, Clock]:
    config = load_project(root)
    walks: list[int] = []

    def scan() -> WatchList:
        walks.append(1)
        return dev_watch_list(config)

    clock = Clock()
    return walks, FileWatcher(scan, clock=clock), clock


def _poll(watcher: FileWatcher, times: int) -> list[object]:
    """``times`` polls as ``ReloadGate.poll`` makes them; the changes each found."""
    return [watcher.changes() for _ in range(times) if watcher.due()]


def test_a_directory_dated_in_the_future_is_walked_only_until_its_date_is_trusted(
    tmp_path: Path,
) -> None:
    """tar, rsync or a mount whose clock runs ahead leave a folder dated after now: its mtime
    stayed 'too recent to trust' forever, and every poll walked the whole tree again."""
    root = _project(tmp_path)
    _date(root, time.time_ns() - HOUR)
    future = time.time_ns() + HOUR
    os.utime(root / "pkg" / "d1", ns=(future, future))
    walks, watcher, clock = _counting(root)
    _poll(watcher, 3)  # first seen now: not trusted yet, as a folder just changed is not
    clock.now += RACY_NS + 1
    _poll(watcher, 1)  # the walk that starts after the window: trusted from then on
    settled = len(walks)
    assert _poll(watcher, 20) == [] and len(walks) == settled
    # Trusted, not ignored: a file added there moves the folder's mtime to now.
    (root / "pkg" / "d1" / "new.py").write_text("y")
    assert _poll(watcher, 1) == [[root / "pkg" / "d1" / "new.py"]]


def test_a_same_size_edit_that_keeps_the_mtime_is_a_change(tmp_path: Path) -> None:
    """``touch -r``, ``rsync -t`` or a checkout restoring the old mtime: size and mtime are the
    same, the ctime is not."""
    root = _project(tmp_path)
    module = root / "pkg" / "d0" / "m.py"
    _date(root, time.time_ns() - HOUR)
    before = module.stat()
    walks, watcher, _ = _counting(root)
    module.write_text("z")
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert watcher.stale()
    assert watcher.changes() == [module]


def _coarse(path: str) -> os.stat_result:
    """A filesystem that keeps times to the second and no separate ctime (FAT, some network
    mounts; Linux's own timestamps are a 4 ms tick on kernels before 6.13)."""
    real = os.stat(path)
    second = real.st_mtime_ns - real.st_mtime_ns % 10**9
    times = {"st_atime_ns": second, "st_mtime_ns": second, "st_ctime_ns": second}
    seconds = (second // 10**9,) * 3
    return os.stat_result((*tuple(real)[:7], *seconds), times)


def test_a_same_size_edit_within_one_mtime_tick_is_a_change(tmp_path: Path) -> None:
    """Two saves in one tick of a coarse clock leave size, mtime, ctime and inode as they were:
    a file whose mtime is within RACY_NS of the scan is compared by content until a later
    look can trust its stat (git's racily clean entries)."""
    root = _project(tmp_path)
    module = root / "pkg" / "d0" / "m.py"
    clock = Clock()
    now = clock.now - clock.now % 10**9
    config = load_project(root)
    walks: list[int] = []

    def scan() -> WatchList:
        walks.append(1)
        return dev_watch_list(config)

    _date(root, now - HOUR)  # the folders: only the file is racy here
    module.write_text("a")
    os.utime(module, ns=(now, now))
    watcher = FileWatcher(scan, clock=clock, stat=_coarse)
    module.write_text("b")  # same size, and the same second
    os.utime(module, ns=(now, now))
    assert watcher.stale()  # a request waits for it, as for any save
    assert watcher.changes() == [module]
    assert not watcher.stale()
    # Idle while the file is racy: its content is read again each poll, the tree is not walked.
    walked = len(walks)
    assert _poll(watcher, 5) == [] and len(walks) == walked
    module.write_text("c")
    os.utime(module, ns=(now, now))
    assert _poll(watcher, 1) == [[module]]
    # Past the window its stat is trusted: nothing is read or walked any more.
    clock.now += RACY_NS + 1
    walked = len(walks)
    assert _poll(watcher, 5) == [] and len(walks) == walked
    assert not watcher.due()


def test_an_edit_in_place_costs_one_walk(tmp_path: Path) -> None:
    """The racy-file rule reads the edited file again on the next polls; it does not make them
    walk the tree (a 20k-file project took 0.13 s of CPU a walk)."""
    root = _project(tmp_path, dirs=20)
    _date(root, time.time_ns() - HOUR)
    walks, watcher, clock = _counting(root)
    assert _poll(watcher, 5) == [] and len(walks) == 1
    module = root / "pkg" / "d3" / "m.py"
    module.write_text("edited")
    assert _poll(watcher, 10) == [[module]]
    assert len(walks) == 2
    clock.now += RACY_NS + 1
    assert _poll(watcher, 10) == [] and len(walks) == 2


def test_a_request_reads_only_the_newest_small_racy_files_and_the_poll_reads_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a checkout every file is racy: each request read all of them (3,000 files
    and a 64 MiB Data module: 0.24 s a request, for the whole window). A request reads the
    newest few small ones; the poll still reads every one, so a same-tick edit of the big
    file reloads on the next poll. Counts reads."""
    reads: list[str] = []

    def counting(path: str) -> bytes | None:
        reads.append(path)
        return digest(path)

    monkeypatch.setattr(watcher_module, "digest", counting)
    clock = Clock()
    now = clock.now - clock.now % 10**9
    small = [tmp_path / f"m{i}.py" for i in range(REQUEST_READS + 20)]
    big = tmp_path / "blob.bin"
    for path in small:
        path.write_text("x")
    big.write_bytes(b"a" * (REQUEST_READ_MAX + 1))
    for path in [*small, big, tmp_path]:
        os.utime(path, ns=(now, now))
    scan = lambda: WatchList((*small, big), (tmp_path,))  # noqa: E731
    watcher = FileWatcher(scan, clock=clock, stat=_coarse)
    reads.clear()
    assert not watcher.stale()
    assert str(big) not in reads and len(reads) == REQUEST_READS
    big.write_bytes(b"b" * (REQUEST_READ_MAX + 1))  # same size, and the same second
    os.utime(big, ns=(now, now))
    assert not watcher.stale()  # a request does not read it
    assert watcher.due() and watcher.changes() == [big]  # the poll does
