"""A scheduled event's outcome, as workerd reports it: ``ok`` when the handler and its
waitUntil work finished, ``exception`` when the handler raised *or* a waitUntil task failed
(workerd's ``IoContext::taskFailed`` sets the event's waitUntil status to EXCEPTION, and the
scheduled result carries that status). A cron whose only write was lost in ``ctx.wait_until``
(a KV put refused, say) used to end ``ok``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.harness import Harness, write_project

WORKER = """
async def _fail():
    raise RuntimeError("the write was refused")

async def _fine():
    return None

async def scheduled(controller, env, ctx):
    if controller.cron == "raises":
        raise RuntimeError("the handler failed")
    if controller.cron == "background fails":
        ctx.wait_until(_fail())
    else:
        ctx.wait_until(_fine())
"""


@pytest.mark.parametrize(
    ("cron", "outcome"),
    [("all fine", "ok"), ("raises", "exception"), ("background fails", "exception")],
)
def test_a_failed_wait_until_makes_the_outcome_exception(
    harness: Harness, tmp_path: Path, cron: str, outcome: str
) -> None:
    deployment = harness.deploy(write_project(tmp_path / "cron-outcome", WORKER))
    result = harness.run(harness.supervisor.scheduled(deployment, cron))
    assert result.outcome == outcome, result
    if cron == "background fails":
        assert "the write was refused" in result.message, result
