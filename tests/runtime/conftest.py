"""The shared runtime harness (one zygote and server for the session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runtime.harness import Harness
from tests.runtime.upstream import Upstream


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    instance = Harness(tmp_path_factory.mktemp("state"))
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    """A real HTTP server on loopback that a module's workers fetch from (``upstream.py``)."""
    server = Upstream()
    yield server
    server.close()
