"""Fault injection for the stall and hung-start tests, in a real ``ember models serve`` process
started with this directory first on PYTHONPATH (Python imports ``sitecustomize`` at startup).

- ``EMBER_TEST_WEDGE`` names a file: while it exists, ``LLMEngine.step`` blocks (a stand-in for
  a deadlock or a GPU kernel that never returns); the process, its engine thread and its HTTP
  loop stay alive, so only a health check that watches the engine's progress can tell.
- ``EMBER_TEST_HANG_LOADING`` names a file: while it exists, the server's startup blocks its
  event loop after the port is bound (a load that hangs where no request is answered: connections
  are accepted by the kernel and never read), with the process running, not stopped.

Nothing else changes: the engine, the server and the pool are the real ones.
"""

import os
import time

_WEDGE = os.environ.get("EMBER_TEST_WEDGE")
_HANG = os.environ.get("EMBER_TEST_HANG_LOADING")


def _wait_while(path: str) -> None:
    while os.path.exists(path):
        time.sleep(0.05)


if _WEDGE:
    from ember.models.engine import llm_engine

    _step = llm_engine.LLMEngine.step

    def _wedged_step(self):  # noqa: ANN001, ANN202
        _wait_while(_WEDGE)
        return _step(self)

    llm_engine.LLMEngine.step = _wedged_step

if _HANG:
    from ember.models.server import state

    _start_loading = state.ServerState.start_loading

    def _hung_start_loading(self):  # noqa: ANN001, ANN202
        _wait_while(_HANG)  # on the event loop (the lifespan): nothing is answered meanwhile
        return _start_loading(self)

    state.ServerState.start_loading = _hung_start_loading
