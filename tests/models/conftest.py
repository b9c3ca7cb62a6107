"""Model tests build native kernels into a temporary cache, never the user's."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    previous = os.environ.get("EMBER_KERNEL_CACHE")
    os.environ["EMBER_KERNEL_CACHE"] = str(tmp_path_factory.mktemp("kernels"))
    yield
    if previous is None:
        del os.environ["EMBER_KERNEL_CACHE"]
    else:
        os.environ["EMBER_KERNEL_CACHE"] = previous
