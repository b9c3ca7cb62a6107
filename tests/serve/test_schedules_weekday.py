"""``PUT .../schedules`` reads the day of week as the platform does: 1 = Sunday to 7 = Saturday."""

from __future__ import annotations

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("ok")
"""


def test_schedules_refuse_weekday_zero_and_keep_seven(serve: ServeProcess) -> None:
    """0 was Sunday in ember (Unix's count) and is no day on the platform (Quartz's): the API
    refuses it, naming the range, rather than schedule a day the platform would not."""
    account_id, token = permanent_account(serve, "weekdays")
    schedules = f"/accounts/{account_id}/workers/scripts/weekly/schedules"
    with serve.api(token) as api:
        assert put_worker(api, account_id, "weekly", WORKER).status_code == 200
        refused = api.put(schedules, json=[{"cron": "0 9 * * 0"}])
        assert refused.status_code == 400, refused.text
        message = refused.json()["errors"][0]["message"]
        assert "'0 9 * * 0' is invalid: day of week: 0 is outside 1-7" in message
        assert "write 1 or SUN for Sunday" in message
        kept = api.put(schedules, json=[{"cron": "0 9 * * 7"}, {"cron": "0 9 * * 6L"}])
        assert kept.status_code == 200, kept.text
        listed = api.get(schedules).json()["result"]["schedules"]
    assert [s["cron"] for s in listed] == ["0 9 * * 7", "0 9 * * 6L"]
