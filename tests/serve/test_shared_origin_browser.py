"""The shared ``/w/`` origin in a real headless Chromium (walk7's 08 and 10): one tenant's page
can neither read another tenant's worker with a same-origin fetch nor install a Service Worker
over the platform that steals a claim link; the claim link, opened in that browser, still
claims the account with the page's button, even after a worker floods the host's cookie jar."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.examples.cdp import Browser, Page, chromium_path
from tests.serve.conftest import ServeProcess, permanent_account, put_worker, temporary_account

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed")

VICTIM_SECRET = "victim-vault-value-4e1c"
VICTIM = f'''
from workers import Response


async def on_fetch(request, env):
    return Response("{VICTIM_SECRET}", headers={{"set-cookie": "session=victim; Path=/"}})
'''
READER = '''
from workers import Response

PAGE = """<html><body><pre id=out>waiting</pre><script>
const out = document.getElementById('out');
fetch('/w/shared-victim/vault/get', {credentials: 'include'})
  .then(r => r.text()).then(t => { out.textContent = 'READ ' + t; },
                                   e => { out.textContent = 'BLOCKED ' + e; });
</script></body></html>"""


async def on_fetch(request, env):
    return Response(PAGE, headers={"content-type": "text/html"})
'''
THIEF = r'''
from workers import Response

PAGE = """<html><body><pre id=out>waiting</pre><script>
const out = document.getElementById('out');
try {
  navigator.serviceWorker.register('/w/shared-thief/sw/sw.js', {scope: '/'})
    .then(r => { out.textContent = 'registered ' + r.scope; },
          e => { out.textContent = 'failed ' + e; });
} catch (e) { out.textContent = 'failed ' + e; }
</script></body></html>"""
SCRIPT = """
self.addEventListener('install', e => self.skipWaiting());
self.addEventListener('activate', e => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', e => {
  if (e.request.url.includes('claim')) {
    e.waitUntil(fetch('/w/shared-thief/sw/collect', {method: 'POST', body: e.request.url}));
  }
});
"""


async def on_fetch(request, env):
    url = request.url
    if url.endswith("/sw.js"):
        return Response(SCRIPT, headers={"content-type": "application/javascript",
                                         "service-worker-allowed": "/"})
    if url.endswith("/collect"):
        seen = await env.KV.get("loot") or ""
        await env.KV.put("loot", seen + await request.text() + "\n")
        return Response("ok")
    if url.endswith("/loot"):
        return Response(str(await env.KV.get("loot")))
    return Response(PAGE, headers={"content-type": "text/html"})
'''

FLOOD_HOPS = 5
# Each hop sets 50 cookies (the most one /w/ answer carries) and redirects to the next:
# 250 in all, past Chromium's 180 per host, so it purges.
FLOODER = f"""
from workers import Response


async def on_fetch(request, env):
    hop = int(request.url.rsplit("/", 1)[1])
    cookies = [("set-cookie", f"f{{hop}}x{{i}}=1; Path=/") for i in range(50)]
    if hop + 1 < {FLOOD_HOPS}:
        return Response("", status=302,
                        headers=[("location", f"/w/shared-flood/jar/{{hop + 1}}"), *cookies])
    return Response("<h1>flooded</h1>", headers=[("content-type", "text/html"), *cookies])
"""


@pytest.fixture(scope="module")
def tenants(serve: ServeProcess) -> ServeProcess:
    victim_id, victim_token = permanent_account(serve, "shared-victim")
    with serve.api(victim_token) as client:
        assert put_worker(client, victim_id, "vault", VICTIM).status_code == 200
    thief_id, thief_token = permanent_account(serve, "shared-thief")
    with serve.api(thief_token) as client:
        assert put_worker(client, thief_id, "page", READER).status_code == 200
        made = client.post(f"/accounts/{thief_id}/storage/kv/namespaces", json={"title": "loot"})
        kv = [{"name": "KV", "type": "kv_namespace", "namespace_id": made.json()["result"]["id"]}]
        made = put_worker(client, thief_id, "sw", THIEF, bindings=kv)
        assert made.status_code == 200, made.text
    flood_id, flood_token = permanent_account(serve, "shared-flood")
    with serve.api(flood_token) as client:
        assert put_worker(client, flood_id, "jar", FLOODER).status_code == 200
    return serve


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    opened = Browser(tmp_path / "profile")
    try:
        yield opened
    finally:
        opened.close()


async def _text_once_settled(page: Page, selector: str, pending: str) -> str:
    """The element's text once it is there and no longer ``pending`` (a script replaced it,
    or the page navigated to one with other text)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            text = await page.evaluate(
                f"(document.querySelector({selector!r}) || {{}}).textContent || ''"
            )
        except RuntimeError:  # navigating: no context to evaluate in for a moment
            text = pending
        if text not in (pending, ""):
            return str(text)
        await asyncio.sleep(0.05)
    raise AssertionError(f"{selector} still says {pending!r}")


def test_a_page_cannot_read_another_tenants_worker(tenants: ServeProcess, browser: Browser) -> None:
    async def visit() -> tuple[str, str]:
        page, socket = await browser.page()
        try:
            await page.navigate(tenants.url + "/w/shared-thief/page/")
            text = await _text_once_settled(page, "#out", "waiting")
            return text, await page.evaluate("self.origin")
        finally:
            await socket.close()

    assert httpx.get(tenants.url + "/w/shared-victim/vault/get").text == VICTIM_SECRET
    text, origin = asyncio.run(visit())
    assert text.startswith("BLOCKED"), text  # the page's script ran, its fetch was refused
    assert VICTIM_SECRET not in text and origin == "null"


def test_a_service_worker_cannot_steal_a_claim_link(
    tenants: ServeProcess, browser: Browser
) -> None:
    temp = temporary_account(tenants)
    claim_url, token = temp["claim"]["url"], temp["claim"]["token"]  # type: ignore[index]

    async def visit() -> tuple[str, int, str, str]:
        page, socket = await browser.page()
        try:
            await page.navigate(tenants.url + "/w/shared-thief/sw/")
            attempt = await _text_once_settled(page, "#out", "waiting")
            await page.navigate(str(claim_url))  # later, the same browser opens its claim link
            registered = await page.evaluate(
                "navigator.serviceWorker.getRegistrations().then(r => r.length)"
            )
            seen = await page.evaluate("location.href + ' ' + document.documentElement.outerHTML")
            # The heading before the click: read after it, it may already be the claimed page's.
            before = await page.evaluate("(document.querySelector('h1') || {}).textContent || ''")
            await page.click("button[type=submit]")
            result = await _text_once_settled(page, "h1", before)
            return attempt, registered, seen, result
        finally:
            await socket.close()

    attempt, registered, seen, result = asyncio.run(visit())
    assert attempt.startswith("failed"), attempt
    assert registered == 0
    assert str(temp["account"]["name"]) in seen and str(token) not in seen  # type: ignore[index]
    assert result == "Account claimed", result
    loot = httpx.get(tenants.url + "/w/shared-thief/sw/loot", timeout=60).text
    assert loot == "None" and str(token) not in loot, loot


def test_a_cookie_flood_on_the_path_does_not_evict_the_claim_cookie(
    tenants: ServeProcess, browser: Browser
) -> None:
    """The claim link leaves its token in a cookie until the button is pressed; meanwhile a
    worker page on /w/ sets 250 cookies on the same host. Chromium purges the host's jar down
    to 150, least recently used first within a priority, Low before High: the worker's cookies
    are Low and the claim cookie High, so the claim still goes through."""
    temp = temporary_account(tenants)
    claim_url = str(temp["claim"]["url"])  # type: ignore[index]

    async def visit() -> tuple[list[str], str]:
        page, socket = await browser.page()
        try:
            await page.navigate(claim_url)  # the token moves into the claim cookie
            await page.navigate(tenants.url + "/w/shared-flood/jar/0")
            cookies = (await page.send("Network.getAllCookies"))["cookies"]
            await page.navigate(tenants.url + "/claim-preview")
            jar = [cookie["name"] for cookie in cookies]
            before = await page.evaluate("(document.querySelector('h1') || {}).textContent || ''")
            if not await page.evaluate("!!document.querySelector('button[type=submit]')"):
                return jar, before  # no claim cookie: "Claim link not valid"
            await page.click("button[type=submit]")
            return jar, await _text_once_settled(page, "h1", before)
        finally:
            await socket.close()

    jar, result = asyncio.run(visit())
    flooded = [name for name in jar if name.startswith("f")]
    assert len(flooded) >= 149, len(jar)  # the flood filled the jar and Chromium purged it
    assert len(flooded) < FLOOD_HOPS * 50
    assert f"f{FLOOD_HOPS - 1}x49" in flooded  # the newest survive
    assert "ember_claim" in jar, sorted(jar)
    assert result == "Account claimed", result
