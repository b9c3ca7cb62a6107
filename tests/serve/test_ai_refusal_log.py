"""``ember serve --log-requests`` thins an account's refused AI calls: a client flooding past its
rate wrote 26,636 lines in a minute (walk18). Each account's first lines of refusals a minute are
written in full, the rest counted into one summary line per minute (at the latest when the
platform stops); another account's lines are its own, and the metrics count every call."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from ember.models.server.metrics import parse_prometheus
from ember.runtime.platform.refusal_log import BURST
from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account

CONFIG = BASE_CONFIG.replace(
    "platform:\n", "platform:\n  accounts:\n    ai_requests_per_minute: 1\n"
)
MODEL = "@cf/ember/no-such-model"
CALLS = 60


def test_a_flood_of_refusals_is_summed_up_and_counted_exactly(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG, "--log-requests", "--metrics-port", "0")
    try:
        flooder, token = permanent_account(serve, "flooder")
        calm, calm_token = permanent_account(serve, "calm")
        with serve.api(token) as api:
            # The first is refused for its model (5007), the rest for the rate (971).
            codes = [
                api.post(f"/accounts/{flooder}/ai/run/{MODEL}", json={"prompt": "hi"}).status_code
                for _ in range(CALLS)
            ]
        assert codes == [400] + [429] * (CALLS - 1), codes
        with serve.api(calm_token) as api:
            assert api.post(f"/accounts/{calm}/ai/run/{MODEL}", json={}).status_code == 400

        found = re.search(r"Metrics on (http://\S+/metrics)", serve.output())
        assert found, serve.output()
        samples = parse_prometheus(httpx.get(found.group(1), timeout=30).text)
        assert samples['ember_ai_requests_total{model="(unknown)",status="429",code="971"}'] == (
            CALLS - 1
        )
        assert samples['ember_ai_requests_total{model="(unknown)",status="400",code="5007"}'] == 2
    finally:
        serve.stop()
    log = serve.output()
    path = f"/client/v4/accounts/{flooder}/ai/run/{MODEL}"
    flood_lines = [
        line
        for line in log.splitlines()
        if f"AI POST {path} " in line or " AI call account=flooder " in line
    ]
    # Every refusal has two lines (the HTTP API's and the AI call's): the first BURST written.
    assert len(flood_lines) == BURST, flood_lines
    summary = re.findall(r"AI refusals account=flooder: (\d+) more lines not logged", log)
    assert summary == [str(2 * CALLS - BURST)], log[-3000:]
    # The calm account's refusal is written whatever the flood did.
    assert re.search(r" AI call account=calm worker=- model=\S+ status=400 code=5007 ", log), log
    assert "AI refusals account=calm" not in log
