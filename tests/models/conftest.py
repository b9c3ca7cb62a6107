"""Model tests build native kernels into a temporary cache, never the user's.

With ``EMBER_KERNELS=0`` (the kernels switched off) the tests marked ``kernels`` are skipped and
the rest exercise the torch and numpy references the engine then runs on; without that switch a
kernel that fails to build fails its tests (the test machines have a C compiler)."""

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("EMBER_KERNELS") != "0":
        return
    skip = pytest.mark.skip(reason="EMBER_KERNELS=0 switches ember's C kernels off")
    for item in items:
        if item.get_closest_marker("kernels") is not None:
            item.add_marker(skip)
