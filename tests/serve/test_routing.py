"""Which worker a request names: Host names and /w/ paths, edge cases; the weighted pick and
the version-overrides header."""

from __future__ import annotations

import collections
import random

from ember.cli.tail import pretty
from ember.runtime.platform.overrides import HEADER as OVERRIDES
from ember.runtime.platform.overrides import pinned_version
from ember.runtime.platform.routing import WorkerRoute, split_worker_path, worker_of_host


def test_hosts_that_name_a_worker() -> None:
    assert worker_of_host("hello.acme.localhost:8787") == ("acme", "hello")
    assert worker_of_host("hello.acme.localhost") == ("acme", "hello")  # wrangler's, no port
    assert worker_of_host("Hello.ACME.LocalHost.") == ("acme", "hello")
    assert worker_of_host("hello.acme.workers.dev") == ("acme", "hello")
    assert worker_of_host("my_worker.quiet-otter-1234.localhost:1") == (
        "quiet-otter-1234",
        "my_worker",
    )
    for other in (
        "127.0.0.1:8787",
        "localhost:8787",
        "acme.localhost",
        "a.b.acme.localhost",
        ".acme.localhost",
        "[::1]:8787",
        "hello.acme.example.com",
        "",
    ):
        assert worker_of_host(other) is None, other


def test_paths_that_name_a_worker_are_rewritten() -> None:
    scope = {"type": "http", "path": "/w/Acme/hello/x/y", "raw_path": b"/w/Acme/hello/x%2Fy"}
    account, worker, inner = split_worker_path(scope)  # type: ignore[misc]
    assert (account, worker) == ("acme", "hello")
    assert inner["path"] == "/x/y" and inner["raw_path"] == b"/x%2Fy"
    assert inner["root_path"] == "/w/Acme/hello" and scope["path"] == "/w/Acme/hello/x/y"
    assert split_worker_path({"path": "/w/acme/hello"})[2]["path"] == "/"  # type: ignore[index]
    for other in ("/w/", "/w/acme", "/w//hello/", "/client/v4/user", "/wx/a/b"):
        assert split_worker_path({"path": other}) is None, other


def test_a_gradual_deployment_splits_by_percentage() -> None:
    route = WorkerRoute("acme", "hello", (("old", 25.0), ("new", 75.0)))
    assert route.pick(0.0) == "old" and route.pick(0.2499) == "old" and route.pick(0.25) == "new"
    random.seed(5)
    seen = collections.Counter(route.pick() for _ in range(4000))
    assert 850 < seen["old"] < 1150 and seen["old"] + seen["new"] == 4000
    assert WorkerRoute("a", "b", (("only", 100.0),)).pick() == "only"


def test_tail_pretty_format() -> None:
    text = pretty(
        {
            "outcome": "exception",
            "eventTimestamp": 1_800_000_000_000,
            "event": {
                "request": {"method": "GET", "url": "http://h/x"},
                "response": {"status": 500},
            },
            "logs": [{"level": "log", "message": ["hi", 3]}],
            "exceptions": [{"name": "KeyError", "message": "'k'"}],
        }
    )
    assert text.splitlines() == [
        "GET http://h/x - Exception (500) @ 2027-01-15 08:00:00 UTC",
        "  (log) hi 3",
        "  ✘ KeyError: 'k'",
    ]
    cron = pretty({"outcome": "ok", "eventTimestamp": 0, "event": {"cron": "* * * * *"}})
    assert cron == '"* * * * *" @ 1970-01-01 00:00:00 UTC - Ok'


def test_version_override_header_is_an_sf_dictionary() -> None:
    vid = "dc8dcd28-271b-4367-9840-6c244f84cb40"

    def pinned(*values: str, worker: str = "my-worker") -> str | None:
        return pinned_version([(OVERRIDES, v.encode()) for v in values], worker)

    assert pinned(f'my-worker="{vid}"') == vid  # Cloudflare's docs' example
    assert pinned(f'a="x", my-worker="{vid}";q=1, b=2') == vid
    assert pinned('a="x"', f'my-worker="{vid}"') == vid  # two header lines are one dictionary
    assert pinned(f'my-worker="old", my-worker="{vid}"') == vid  # the last one wins
    assert pinned(f'2fa="{vid}"', worker="2fa") == vid  # worker names may start with a digit
    assert pinned(r'my-worker="a\"b"') == 'a"b'
    assert pinned(f'other="{vid}"') is None
    assert pinned() is None
    for invalid in (
        f"my-worker={vid}",  # a token, not a string
        f'my-worker="{vid}',  # unterminated
        f'my-worker=("{vid}")',  # an inner list
        f'my-worker="{vid}",',  # a trailing comma
        f'My-Worker="{vid}"',  # keys are lowercase
        f'my-worker="{vid}" junk',
        "my-worker",  # Boolean true
    ):
        assert pinned(invalid) is None, invalid
    assert pinned_version([(OVERRIDES, b'my-worker="\xff"')], "my-worker") is None
