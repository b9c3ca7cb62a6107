"""``PUT .../schedules`` reads the day of week as the platform does: 1 = Sunday to 7 = Saturday."""

from __future__ import annotations

from ember.runtime.cron import WEEKDAY_NUMBERING
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


def test_a_cron_stored_before_the_platforms_weekdays_is_warned_of(serve: ServeProcess) -> None:
    """Crons stored while ember counted 0 = Sunday carry no numbering: one with a numeric
    weekday now fires a day earlier than it did, and ``ember serve`` says so at start, naming
    it; stored again through the API, it carries the numbering and is not warned of."""
    account_id, token = permanent_account(serve, "oldweek")
    schedules = f"/accounts/{account_id}/workers/scripts/weekly/schedules"
    with serve.api(token) as api:
        assert put_worker(api, account_id, "weekly", WORKER).status_code == 200
        assert api.put(schedules, json=[{"cron": "0 9 * * 2-6"}]).status_code == 200
    plane = serve.plane()
    account = plane.accounts.find(account_id)
    assert account is not None
    stored = plane.scripts.get(account, "weekly").settings["schedules"]
    assert stored == [{"cron": "0 9 * * 2-6", "weekdays": WEEKDAY_NUMBERING}]
    old = [{"cron": "0 9 * * 2-6"}, {"cron": "*/5 * * * *"}]  # as stored before: no numbering
    plane.scripts.patch_settings(account, "weekly", {"schedules": old})
    serve.stop()
    serve.start()
    warned = [line for line in serve.output().splitlines() if "worker oldweek/weekly:" in line]
    assert len(warned) == 1, warned  # the numbered one; */5 fires alike either way
    assert "'0 9 * * 2-6'" in warned[0] and "fires a day earlier" in warned[0]
    with serve.api(token) as api:
        assert api.put(schedules, json=[{"cron": "0 9 * * 2-6"}]).status_code == 200
        assert api.get(schedules).json()["result"]["schedules"][0]["cron"] == "0 9 * * 2-6"
    serve.stop()
    serve.start()
    warned = [line for line in serve.output().splitlines() if "worker oldweek/weekly:" in line]
    assert len(warned) == 1  # the first start's line only
