"""A worker that fetches its own URL is stopped after 16 nested invocations with Cloudflare's
loop limit (1019; "A Worker cannot call itself or another Worker more than 16 times", counted
down in the ``CF-EW-Via`` header every subrequest carries).

``ember serve`` refuses subrequests to loopback and private addresses, so a worker reaches the
platform only at a public address. The test gives it one: the platform runs in a network
namespace the test makes, whose ``lo`` also carries a global address (``PUBLIC``); nothing in
that namespace reaches beyond it, and the test's own requests go from a thread moved into it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ember.runtime.deployments.plane import ControlPlane
from tests.platform.netns import LoopbackNamespace, namespace_unavailable
from tests.serve.conftest import BASE_CONFIG, put_worker

PUBLIC = "192.0.0.9"  # IANA's PCP anycast: global to the policy, inside the namespace only
WORKER = """\
from workers import Response, fetch


async def on_fetch(request, env):
    depth = int(request.url.rsplit("depth=", 1)[1]) if "depth=" in request.url else 0
    if request.headers.get("x-forge"):
        headers = {"CF-EW-Via": "1000"}  # a worker cannot reset its budget
    else:
        headers = {}
    reply = await fetch(f"{env.ORIGIN}/w/looper/loop/?depth={depth + 1}", headers=headers)
    return Response(f"{depth}>{reply.status} {await reply.text()}")
"""


@pytest.fixture
def namespace() -> Iterator[LoopbackNamespace]:
    reason = namespace_unavailable()
    if reason is not None:
        pytest.skip(reason)
    ns = LoopbackNamespace()
    try:
        ns.add_address(f"{PUBLIC}/32")
        yield ns
    finally:
        ns.close()


def test_a_worker_fetching_itself_hits_the_loop_limit(
    namespace: LoopbackNamespace, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    config = tmp_path / "serve.yaml"
    config.write_text(BASE_CONFIG)
    port = namespace.start_platform(state, config, "--ip", PUBLIC)
    origin = f"http://{PUBLIC}:{port}"
    plane = ControlPlane(state)  # (WAL: safe beside the running platform)
    try:
        account, issued = plane.accounts.create_permanent("looper")
    finally:
        plane.close()
    account_id, token = account.id, issued.token
    var = [{"name": "ORIGIN", "type": "plain_text", "text": origin}]

    def inside() -> tuple[str, str]:
        headers = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=origin + "/client/v4", headers=headers, timeout=60) as api:
            put = put_worker(api, account_id, "loop", WORKER, bindings=var)
            assert put.status_code == 200, put.text
        plain = httpx.get(f"{origin}/w/looper/loop/", timeout=120).text
        forged = httpx.get(f"{origin}/w/looper/loop/", headers={"x-forge": "1"}, timeout=120)
        return plain, forged.text

    with ThreadPoolExecutor(1, initializer=namespace.enter_thread) as pool:
        plain, forged = pool.submit(inside).result(300)
    for text in (plain, forged):
        hops = re.findall(r"(\d+)>(\d+) ", text)
        assert hops[:17] == [(str(d), "200") for d in range(16)] + [("16", "508")], text[:600]
        assert len(hops) == 17, text[:600]
        assert text.endswith("Worker hit loop limit. (error code: 1019)\n"), text[-200:]
