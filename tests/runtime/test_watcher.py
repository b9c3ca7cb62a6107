"""The dev file watcher's per-request check (stat only) and the reload gate built on it."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from ember.config import load_project
from ember.runtime.dev_watch import dev_watch_list
from ember.runtime.reload_gate import ReloadGate
from ember.runtime.watcher import FileWatcher, WatchList


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    (root / "src").mkdir(parents=True)
    (root / "src" / "worker.py").write_text("one")
    (root / "ember.yaml").write_text("name: app\nmain: src/worker.py\n")
    return root


def _watcher(root: Path) -> FileWatcher:
    """What ``ember dev`` watches in the project as its config is now."""
    config = load_project(root)
    return FileWatcher(lambda: dev_watch_list(config))


def test_stale_sees_edits_new_files_and_renames_until_changes_reads_them(tmp_path: Path) -> None:
    root = _project(tmp_path)
    watcher = _watcher(root)
    assert not watcher.stale()

    (root / "src" / "worker.py").write_text("two")  # same size: mtime (and ctime) only
    assert watcher.stale()
    assert watcher.changes() == [root / "src" / "worker.py"]
    assert not watcher.stale()

    (root / "src" / "helpers.py").write_text("x")  # a new file: its directory's mtime
    assert watcher.stale()
    assert watcher.changes() == [root / "src" / "helpers.py"]

    replacement = root / "src" / "worker.py.tmp"  # an editor's atomic save
    replacement.write_text("six")
    os.replace(replacement, root / "src" / "worker.py")
    assert watcher.stale()
    assert watcher.changes() == [root / "src" / "worker.py"]

    (root / "src" / "helpers.py").unlink()
    assert watcher.stale()
    assert watcher.changes() == [root / "src" / "helpers.py"]
    assert not watcher.stale()


def test_state_under_a_hidden_directory_does_not_make_requests_wait(tmp_path: Path) -> None:
    """KV writes go to .ember/state in the project: they must not look like code changes."""
    root = _project(tmp_path)
    (root / ".ember" / "state").mkdir(parents=True)
    watcher = _watcher(root)
    (root / ".ember" / "state" / "kv.sqlite").write_bytes(b"data")
    (root / ".ember" / "state" / "kv.sqlite-journal").write_bytes(b"j")
    assert not watcher.stale()


def test_a_secrets_file_created_later_is_seen(tmp_path: Path) -> None:
    root = _project(tmp_path)
    watcher = _watcher(root)
    assert not watcher.stale()
    (root / ".dev.vars").write_text("A=1\n")
    assert watcher.stale()
    assert watcher.changes() == [root / ".dev.vars"]
    assert not watcher.stale()


def test_a_clean_answer_in_poll_lasts_until_the_loop_turns(tmp_path: Path) -> None:
    root = _project(tmp_path)

    async def main() -> tuple[bool, bool, bool]:
        async def reload(changed: list[Path]) -> None:
            pass

        gate = ReloadGate(_watcher(root), reload)
        first = gate.stale_in_poll()
        (root / "ember.yaml").write_text("name: b\n")
        remembered = gate.stale_in_poll()  # same batch of callbacks: the answer holds
        await asyncio.sleep(0)
        return first, remembered, gate.stale_in_poll()

    assert asyncio.run(main()) == (False, False, True)


def test_concurrent_waiters_share_one_reload_and_a_save_during_it_gets_another(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    worker = root / "src" / "worker.py"
    reloads: list[list[Path]] = []

    async def main() -> None:
        saved_during = asyncio.Event()

        async def reload(changed: list[Path]) -> None:
            reloads.append(changed)
            if len(reloads) == 1:
                await asyncio.sleep(0.05)
                worker.write_text("three")  # saved while the first reload runs
                saved_during.set()

        gate = ReloadGate(_watcher(root), reload)
        assert gate.pending() is None
        worker.write_text("two")
        waits = [gate.pending() for _ in range(5)]
        assert all(w is not None for w in waits)
        await asyncio.gather(*waits)  # type: ignore[misc]
        assert saved_during.is_set()
        assert gate.pending() is None

    asyncio.run(main())
    assert reloads == [[worker], [worker]]


def test_the_poll_loop_outlives_a_reload_that_raises(tmp_path: Path) -> None:
    """A reload failing with an error no one expected is logged; the next save still reloads
    (crons and the terminal rely on the poll loop, not on requests)."""
    root = _project(tmp_path)
    worker = root / "src" / "worker.py"
    reloads: list[str] = []

    async def main() -> None:
        async def reload(changed: list[Path]) -> None:
            reloads.append(worker.read_text())
            if len(reloads) == 1:
                raise RuntimeError("deploy broke in a way nobody planned for")

        gate = ReloadGate(_watcher(root), reload)
        poll = asyncio.ensure_future(gate.poll(0.01))
        worker.write_text("two")
        for _ in range(500):
            await asyncio.sleep(0.01)
            if reloads:
                break
        worker.write_text("three!")
        for _ in range(500):
            await asyncio.sleep(0.01)
            if len(reloads) == 2:
                break
        assert not poll.done()
        poll.cancel()

    asyncio.run(main())
    assert reloads == ["two", "three!"]


def test_files_no_rule_picks_are_not_watched_and_a_rescope_adopts_new_modules(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    log = root / "src" / "dev.log"
    watcher = _watcher(root)
    log.write_text("line\n")  # a new entry in src/: a look, and nothing to reload
    assert watcher.stale() and watcher.changes() == []
    for n in range(3):
        with log.open("a") as out:
            out.write(f"line {n}\n")
        assert not watcher.stale()
    (root / "ember.yaml").write_text(
        "name: app\nmain: src/worker.py\nrules:\n  - type: Text\n    globs: ['**/*.log']\n"
    )
    assert watcher.changes() == [root / "ember.yaml"]
    config = load_project(root)
    watcher.rescope(lambda: dev_watch_list(config))  # the reload reads dev.log after this
    assert not watcher.stale() and watcher.changes() == []
    log.write_text("edited\n")
    assert watcher.changes() == [log]


def _settled(root: Path) -> None:
    """Date every directory of the project an hour back: changed long before any scan."""
    hour_ago = time.time_ns() - 3600 * 10**9
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(directory, ns=(hour_ago, hour_ago))


def test_the_poll_walks_the_project_only_when_something_moved(tmp_path: Path) -> None:
    """A poll used to rescan the whole tree every interval (0.5 s a poll on the event loop in
    a 50k-file project); now it stats the watched paths and walks only when one moved."""
    root = _project(tmp_path)
    _settled(root)
    config = load_project(root)
    scans: list[int] = []
    reloads: list[list[Path]] = []

    def scan() -> WatchList:
        scans.append(1)
        return dev_watch_list(config)

    async def main() -> None:
        async def reload(changed: list[Path]) -> None:
            reloads.append(changed)

        gate = ReloadGate(FileWatcher(scan), reload)
        poll = asyncio.ensure_future(gate.poll(0.001))
        for _ in range(20):  # many polls, and nothing moved
            await asyncio.sleep(0.005)
        assert len(scans) == 1  # the watcher's first look only
        (root / "src" / "helpers.py").write_text("x")
        for _ in range(500):
            await asyncio.sleep(0.01)
            if reloads:
                break
        poll.cancel()

    asyncio.run(main())
    assert reloads == [[root / "src" / "helpers.py"]]


def test_a_file_added_while_its_directory_was_scanned_is_found_by_the_poll(
    tmp_path: Path,
) -> None:
    """The file lands after the walk listed src/ and before src/ is stat'ed: src/'s mtime
    already shows it, so stale() cannot; the poll rescans while a directory's mtime is recent."""
    root = _project(tmp_path)
    config = load_project(root)
    late = root / "src" / "late.py"

    def scan() -> WatchList:
        listing = dev_watch_list(config)
        if not late.exists():
            late.write_text("x")
        return listing

    watcher = FileWatcher(scan)
    assert not watcher.stale()
    assert watcher.due()
    assert watcher.changes() == [late]
    _settled(root)
    assert watcher.changes() == []
    assert not watcher.due()


def test_an_assets_only_project_reloads_for_no_new_file(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "public").mkdir(parents=True)
    (root / "ember.yaml").write_text("name: site\nassets:\n  directory: public\n")
    (root / "public" / "index.html").write_text("hi")
    watcher = _watcher(root)
    (root / "notes.md").write_text("x")
    (root / "dev.log").write_text("x")
    assert watcher.changes() == []
    (root / "ember.yaml").write_text("name: site2\nassets:\n  directory: public\n")
    assert watcher.changes() == [root / "ember.yaml"]


def test_an_asset_edit_beside_the_worker_reloads_nothing(tmp_path: Path) -> None:
    """``ember init``'s layout, public/ inside the module root: assets are read per request,
    so neither an edit nor a new file there makes a request wait or the poll walk."""
    root = tmp_path / "app"
    (root / "public").mkdir(parents=True)
    (root / "ember.yaml").write_text("name: app\nmain: worker.py\nassets:\n  directory: public\n")
    (root / "worker.py").write_text("one")
    (root / "public" / "index.html").write_text("v1")
    _settled(root)
    watcher = _watcher(root)
    (root / "public" / "index.html").write_text("v2, longer")
    (root / "public" / "style.css").write_text("c")
    assert not watcher.due() and watcher.changes() == []
