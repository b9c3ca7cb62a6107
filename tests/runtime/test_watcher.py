"""The dev file watcher's per-request check (stat only) and the reload gate built on it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from ember.config import load_project
from ember.runtime.dev_watch import dev_watch_list
from ember.runtime.reload_gate import ReloadGate
from ember.runtime.watcher import FileWatcher


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
