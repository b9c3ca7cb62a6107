"""Cloudflare's Workers examples pages (developers.cloudflare.com/workers/examples/), their
Python tabs run unchanged on ember's dev supervisor: each test deploys one page's code
(``cf_examples/``), with its outbound URLs pointed at a loopback upstream, and checks what the
page says the platform answers.

An example that passes a request through to its origin (``fetch(request)``) is asked with the
upstream's address as its Host, so that ``request.url`` names the upstream (as the zone's
origin would be on the platform).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from tests.runtime.cf_docs import example
from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream


def deploy(harness: Harness, tmp_path: Path, name: str, config: str = "", **urls: str) -> str:
    return harness.deploy(write_project(tmp_path / name, example(name, **urls), config))


def origin(upstream: Upstream) -> dict[str, str]:
    """Headers that make the request's URL the upstream's (its origin, on the platform)."""
    return {"Host": upstream.url.split("//", 1)[1]}


def test_return_html_json_and_early_hints(harness: Harness, tmp_path: Path) -> None:
    with harness.client(deploy(harness, tmp_path, "return_html")) as client:
        html = client.get("/")
    assert html.headers["content-type"] == "text/html;charset=UTF-8"
    assert html.text.startswith("<!DOCTYPE html>") and "<h1>Hello World</h1>" in html.text
    with harness.client(deploy(harness, tmp_path, "return_json")) as client:
        data = client.get("/")
    assert (data.headers["content-type"], data.json()) == ("application/json", {"hello": "world"})
    with harness.client(deploy(harness, tmp_path, "early_hints")) as client:
        page, css = client.get("/"), client.get("/test.css")
    assert page.headers["link"] == "</test.css>; rel=preload; as=style"
    assert page.headers["content-type"] == "text/html" and "Early Hints test page" in page.text
    assert (css.headers["content-type"], css.text) == ("text/css", "body { color: red; }")


def test_redirects(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    with harness.client(deploy(harness, tmp_path, "redirect_all")) as client:
        every = client.get("/any")
    assert (every.status_code, every.headers["location"]) == (301, "https://example.com")
    domain_id = deploy(harness, tmp_path, "redirect_domain")
    with harness.client(domain_id) as client:
        moved = client.get("/a/b?x=1")
    # As published, the page's f-string joins path and query without the "?".
    assert (moved.status_code, moved.headers["location"]) == (301, "https://example.com/a/bx=1")
    assert "https://example.com/a/bx=1" in harness.console(domain_id)
    with harness.client(deploy(harness, tmp_path, "bulk_redirects")) as client:
        mapped = client.get("/bulk4")
        other = client.get("/echo", headers=origin(upstream))
    assert (mapped.status_code, mapped.headers["location"]) == (301, "https://google.com")
    assert (other.status_code, other.json()["path"]) == (200, "/echo")
    with harness.client(deploy(harness, tmp_path, "country_code_redirect")) as client:
        country = client.get("/")  # ember dev's request.cf says US, as wrangler dev's does
    assert (country.status_code, country.headers["location"]) == (302, "https://example.com/us")


def test_conditional_response_branches(harness: Harness, tmp_path: Path) -> None:
    # Its last line, `return fetch(request)`, never imports fetch: a NameError there too.
    with harness.client(deploy(harness, tmp_path, "conditional_response")) as client:
        replies = [
            client.get("/file.xml"),
            client.post("/"),
            client.get("/", headers={"User-Agent": "crawlbot"}),
            client.get("/", headers={"CF-Connecting-IP": "1.2.3.4"}),
            client.get("/", headers={"CF-Device-Type": "mobile"}),
        ]
    assert [(r.status_code, r.text) for r in replies[:4]] == [
        (403, "Blocked Extension"),
        (200, "Response for POST"),
        (403, "Block User Agent containing bot"),
        (403, "Block the IP 1.2.3.4"),
    ]
    assert (replies[4].status_code, replies[4].headers["location"]) == (
        302,
        "https://mobile.example.com",
    )


def test_origin_pass_through_examples(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    key = {"X-Custom-PSK": "mypresharedkey"}
    with harness.client(deploy(harness, tmp_path, "auth_with_headers")) as client:
        refused = client.get("/echo", headers=origin(upstream))
        allowed = client.get("/echo", headers={**origin(upstream), **key})
    assert (refused.status_code, refused.text) == (403, "Sorry, you have supplied an invalid key.")
    assert allowed.json()["headers"]["x-custom-psk"] == "mypresharedkey"
    for name in ("block_on_tls", "bulk_origin_proxy"):  # dev's cf.tlsVersion is TLSv1.3
        with harness.client(deploy(harness, tmp_path, name)) as client:
            passed = client.get("/echo?q=1", headers=origin(upstream))
        assert (passed.status_code, passed.json()["query"]) == (200, {"q": "1"}), name


def test_hot_link_protection(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    # Its response.headers["Content-Type"] reads a workers.fetch response's headers, which on
    # Cloudflare (and here) are a dict of lower-case names: a KeyError, as published.
    image = "/text?type=image/png&body=PNG"
    with harness.client(deploy(harness, tmp_path, "hot_link")) as client:
        hotlinked = client.get(image, headers={**origin(upstream), "Referer": "https://x.test/"})
    assert hotlinked.status_code == 500
    assert "KeyError: 'Content-Type'" in hotlinked.text


def test_fetch_json_post_json_and_aggregate(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    todo = {"https://jsonplaceholder.typicode.com/todos/1": f"{upstream.url}/echo"}
    with harness.client(deploy(harness, tmp_path, "fetch_json", **todo)) as client:
        got = client.get("/")
    assert got.headers["content-type"] == "application/json"
    assert got.json()["method"] == "GET"
    with harness.client(deploy(harness, tmp_path, "post_json", **todo)) as client:
        posted = client.get("/")
    sent = posted.json()
    assert (posted.headers["content-type"], sent["method"]) == ("application/json", "POST")
    assert sent["headers"]["content-type"] == "application/json;charset=UTF-8"
    assert json.loads(sent["body"])["msg"] == "I sent this to the fetch"
    host = {"https://jsonplaceholder.typicode.com": f"{upstream.url}/echo?todo="}
    with harness.client(deploy(harness, tmp_path, "aggregate_requests", **host)) as client:
        both = client.get("/")
    assert both.headers["content-type"] == "application/json;charset=UTF-8"
    assert [d["query"]["todo"] for d in both.json()] == ["/todos/1", "/todos/2"]


def test_modify_request_property(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    urls = {
        "https://foo.example.com/api.js": f"{upstream.url}/echo",
        'some_host = "example.com"': 'some_host = "127.0.0.1"',
    }
    with harness.client(deploy(harness, tmp_path, "modify_request_property", **urls)) as client:
        sent = client.get("/", headers={"x-from-client": "1"}).json()
    assert (sent["method"], sent["body"]) == ("POST", '{"bar": "foo"}')
    assert sent["headers"]["x-example"] == "bar"
    assert sent["headers"]["content-type"] == "application/json"
    assert "x-from-client" not in sent["headers"]  # the init's headers replaced the request's


def test_data_loss_prevention(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    hook = {"https://webhook.flow-wolf.io/hook": f"{upstream.url}/echo"}
    deployment = deploy(harness, tmp_path, "data_loss_prevention", **hook)

    def text(body: str) -> str:
        return f"/text?body={quote(body)}"

    with harness.client(deployment) as client:
        plain = client.get(text("nothing to see"), headers=origin(upstream))
        alerts = upstream.seen.count("/echo")
        mail = client.get(text("You may use this address"), headers=origin(upstream))
        card = client.get(text("card 4111111111111111 here"), headers=origin(upstream))
        alerted = upstream.seen.count("/echo") - alerts
        data = client.get("/echo", headers=origin(upstream))
    assert (plain.status_code, plain.text) == (200, "nothing to see")
    # "me@example.com" put in by its debug line, then redacted; the webhook was posted to.
    assert (mail.status_code, mail.text) == (200, "********** may use this address")
    assert alerted == 2
    assert (card.status_code, card.text) == (403, "credit_card found\nForbidden\n")
    assert card.reason_phrase == "Forbidden"
    assert data.json()["path"] == "/echo"  # not text: the origin's response as it came


def test_security_headers(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    # As the hot-link page: new_headers["Content-Type"] is a KeyError in the dict of lower-case
    # names a workers.fetch response's headers are, on Cloudflare and here.
    with harness.client(deploy(harness, tmp_path, "security_headers")) as client:
        api = client.get("/echo", headers=origin(upstream))
        page = client.get("/text?type=text/html&body=%3Cp%3E", headers=origin(upstream))
    for reply in (api, page):
        assert reply.status_code == 500 and "KeyError: 'Content-Type'" in reply.text


def test_timing_safe_equal(harness: Harness, tmp_path: Path) -> None:
    config = "vars:\n  MY_SECRET_VALUE: s3cret\n"
    with harness.client(deploy(harness, tmp_path, "timing_safe", config)) as client:
        replies = [
            client.get("/"),
            client.get("/", headers={"Authorization": "s3creT"}),
            client.get("/", headers={"Authorization": "s3cret"}),
        ]
    assert [(r.status_code, r.text) for r in replies] == [
        (401, "Unauthorized"),
        (401, "Unauthorized"),
        (200, "Welcome!"),
    ]


def test_cf_object_geolocation_and_logging(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    with harness.client(deploy(harness, tmp_path, "cf_object")) as client:
        cf = client.get("/")
    assert cf.headers["content-type"] == "application/json" and cf.text.startswith('{\n  "')
    assert json.loads(cf.text)["tlsVersion"] == "TLSv1.3"
    with harness.client(deploy(harness, tmp_path, "geo_hello")) as client:
        hello = client.get("/")
    assert "<p> Country: US</p>" in hello.text and "<p> Timezone: " in hello.text
    weather = json.dumps(
        {"data": {"aqi": 7, "city": {"url": "u", "name": "Austin"},
                  "iaqi": {"no2": {"v": 1}, "o3": {"v": 2}, "t": {"v": 21}}}}
    )  # fmt: skip
    api = {"https://api.waqi.info/feed/geo:": f"{upstream.url}/text?body={quote(weather)}&at="}
    with harness.client(deploy(harness, tmp_path, "geo_weather", **api)) as client:
        forecast = client.get("/")
    assert "<p>The temperature is: 21°C.</p>" in forecast.text
    assert "<a href='u'>Austin</a>" in forecast.text
    logged = deploy(harness, tmp_path, "logging_headers")
    with harness.client(logged) as client:
        hello_world = client.get("/", headers={"x-seen": "yes"})
    assert hello_world.text == "Hello world"
    assert any("'x-seen': 'yes'" in line for line in harness.console(logged))


def test_images_and_cron(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    cdn = {"https://imagedelivery.net/": f"{upstream.url}/text?type=image/webp&body=IMG&p="}
    with harness.client(deploy(harness, tmp_path, "images_workers", **cdn)) as client:
        image = client.get("/83eb7b2/public")
    assert (image.status_code, image.text, image.headers["content-type"]) == (
        200,
        "IMG",
        "image/webp",
    )
    cron = deploy(harness, tmp_path, "cron_trigger")
    with harness.client(cron) as client:
        fired = client.get("/cdn-cgi/handler/scheduled", params={"cron": "* * * * *"})
    assert fired.status_code == 200
    harness.wait_for(lambda: "cron processed" in harness.console(cron))


def test_cache_using_fetch_and_ab_testing(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    # The cf cache options have no cache to steer here; the copied response keeps its length.
    with harness.client(deploy(harness, tmp_path, "cache_using_fetch")) as client:
        cached = client.get("/echo", headers=origin(upstream))
    assert (cached.status_code, cached.headers["cache-control"]) == (200, "max-age=1500")
    assert cached.headers["content-length"] == str(len(cached.content))
    with harness.client(deploy(harness, tmp_path, "ab_testing")) as client:
        fresh = client.get("/echo", headers=origin(upstream))
        control = client.get(
            "/echo", headers={**origin(upstream), "cookie": "myExampleWorkersABTest=control"}
        )
    group = fresh.headers["set-cookie"].split(";")[0].split("=")[1]
    assert group in ("test", "control")
    # The group's page (/test/echo, /control/echo) is not the upstream's: its 404, passed on
    # as the example's own Response(res.body, headers=...) does, with status 200.
    assert (fresh.status_code, fresh.text) == (200, "no such route")
    assert (control.status_code, control.text) == (404, "no such route")
    assert upstream.seen[-1] == "/control/echo"


def test_debugging_logs(harness: Harness, upstream: Upstream, tmp_path: Path) -> None:
    # As published it always reaches its except: it raises on a bad status, and on a good one
    # reads a `body` it never set. Its ctx.waitUntil(create_once_callable(coroutine)) is a
    # plain value to workerd's waitUntil: accepted, the log is never posted.
    logs = {"https://log-service.example.com/": f"{upstream.url}/echo"}
    with harness.client(deploy(harness, tmp_path, "debugging_logs", **logs)) as client:
        missing = client.get("/status/404", headers=origin(upstream))
        found = client.get("/echo", headers=origin(upstream))
    assert missing.status_code == 404
    assert missing.headers["x-debug-err"] == "Bad response at origin. Status:404 Body:status bod"
    assert json.loads(missing.text).startswith("Traceback (most recent call last):")
    assert missing.headers["x-debug-stack"] == missing.text
    assert found.status_code == 200 and "UnboundLocalError" in found.headers["x-debug-stack"]
