"""``ember serve`` puts each account's isolates in one cpu cgroup of the account's, so a
tenant running many busy isolates shares contended CPU with another tenant as one party, not
as one party per isolate (``ember/runtime/sandbox/cgroup.py``). Each worker here answers with
its own cpu cgroup, read from ``/proc/self/cgroup`` inside its sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.runtime.sandbox import Layer, probe
from tests.serve.conftest import (
    BASE_CONFIG,
    ServeProcess,
    permanent_account,
    put_worker,
    temporary_account,
)

WHERE_AM_I = """\
from workers import Response


async def on_fetch(request, env):
    for line in open("/proc/self/cgroup").read().splitlines():
        _id, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return Response(path)
    return Response("no cpu cgroup", status=500)
"""


def test_an_accounts_isolates_share_one_cpu_group_and_another_account_has_its_own(
    tmp_path: Path,
) -> None:
    if Layer.CGROUP not in probe().available():
        pytest.skip("this host lacks the cgroup layer (root and cgroup v1)")
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG)
    try:
        groups: dict[tuple[str, str], list[str]] = {}
        for owner, workers in (("acme", ("one", "two")), ("rival", ("three",))):
            account_id, token = permanent_account(serve, owner)
            with serve.api(token) as api:
                for name in workers:
                    stored = put_worker(api, account_id, name, WHERE_AM_I)
                    assert stored.status_code == 200, stored.text
                    reply = serve.worker(owner, name)
                    assert reply.status_code == 200, reply.text
                    groups[(owner, name)] = reply.text.strip("/").split("/")
            for name in workers:
                account_group, worker_group = groups[(owner, name)][-2:]
                assert account_group == f"ember@{account_id}", groups
                assert worker_group.startswith("ember-"), groups
        assert groups[("acme", "one")][-1] != groups[("acme", "two")][-1]  # a group each
        assert groups[("acme", "one")][-2] == groups[("acme", "two")][-2]  # in one account's
        assert groups[("acme", "one")][-2] != groups[("rival", "three")][-2]
        # Temporary accounts: each its own group, all of them inside one group together.
        for _ in range(2):
            account = temporary_account(serve)["account"]
            account_id, name = account["id"], account["name"]  # type: ignore[index]
            with serve.api(account["apiToken"]) as api:  # type: ignore[index]
                assert put_worker(api, account_id, "tmp", WHERE_AM_I).status_code == 200
            reply = serve.worker(name, "tmp")
            assert reply.status_code == 200, reply.text
            outer, own, worker = reply.text.strip("/").split("/")[-3:]
            assert (outer, own) == ("ember@temporary-accounts", f"ember@{account_id}"), reply.text
            assert worker.startswith("ember-"), reply.text
    finally:
        serve.stop()
