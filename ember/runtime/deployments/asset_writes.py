"""What each account's asset files take (``AccountAssets.stored``: scanned once, then kept up
to date, and moved in the temporary pool with it), and writing an upload's files against the
session's bound: their bytes are let in first, under the account's lock, so that two uploads
cannot both pass it, and written outside it; what was not written is let out again."""

from __future__ import annotations

from ember.runtime.deployments.asset_files import AssetFiles
from ember.runtime.deployments.asset_session import AccountAssets, Session, scan
from ember.runtime.deployments.asset_tables import SessionTables
from ember.runtime.deployments.errors import Unauthenticated


class AssetWrites:
    """The accounts' stored asset bytes and the uploads writing them."""

    def __init__(self, files: AssetFiles, tables: SessionTables) -> None:
        self.files = files
        self.tables = tables

    def stored(self, account_id: str, state: AccountAssets) -> int:
        """The account's stored bytes (the caller holds its lock)."""
        if state.stored is None:
            counted = self.tables.pool.files(account_id)  # a temporary account's, kept
            state.stored = scan(self.files.blobs(account_id)) if counted is None else counted
        return state.stored

    def add_stored(self, account_id: str, state: AccountAssets, delta: int) -> None:
        """The account's files take ``delta`` more bytes (the caller holds its lock)."""
        if state.stored is not None:
            state.stored += delta
        self.tables.pool.add_files(account_id, delta)

    def store(self, account_id: str, session: Session, contents: dict[str, bytes]) -> None:
        """Write an upload's files (hash -> content) for ``session``."""
        adding = sum(len(c) for c in contents.values())
        with self.tables.held(account_id) as state:
            with state.lock:
                if state.gone:
                    raise Unauthenticated("the account was deleted while its assets were sent")
                stored = self.stored(account_id, state)
                if session.bound is not None:
                    session.bound.check(stored, adding)
                self.add_stored(account_id, state, adding)
                state.writing += 1
            unwritten = adding
            try:
                for digest, content in contents.items():
                    if self.files.write(self.files.blob(account_id, digest), content):
                        unwritten -= len(content)
            finally:
                with state.lock:
                    state.writing -= 1
                    self.add_stored(account_id, state, -unwritten)
                    if state.gone:
                        # Deleted while this wrote, maybe after its folder was removed: what
                        # was written would stay under a gone account's folder for good.
                        self.files.remove(account_id)
