"""Settings for every test process and every process the tests start.

One OpenMP thread (torch's intra-op pool, numpy's BLAS) unless the caller chose otherwise: the
models under test are tiny, so a second thread only adds synchronisation, and the suite runs two
pytest workers on two cores, where each torch process with a thread per core spins against the
other worker. Measured on the engine, integrity and training tests: 30 -> 8 CPU-seconds, the
same tokens. The model servers the tests start (``--torch-threads`` unset) inherit it; an explicit
``--torch-threads`` or ``torch.set_num_threads`` still wins, and isolates get their own clean
environment. This file is imported before any test module imports torch, which reads the
variable once, when it loads.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def own_compile_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's automaton cache with no compile worker attached and no one attaching it,
    for this test only: an in-process supervisor a module fixture keeps open (test_binding_live's)
    attaches the worker for as long as it lives, so a test that counts builds, or watches its own
    attach and detach, would otherwise see another's worker. Restored afterwards."""
    from ember.models.constrain.automaton_cache import SHARED_AUTOMATA

    monkeypatch.setattr(SHARED_AUTOMATA, "_worker", None)
    monkeypatch.setattr(SHARED_AUTOMATA, "_users", 0)
