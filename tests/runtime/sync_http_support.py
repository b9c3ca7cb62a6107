"""The worker the sync-HTTP-client tests deploy: one route per client and feature.

Every route reads the upstream's origin from the ``x-upstream`` header and answers JSON, so a
test sees what the library in the isolate saw (status, headers, body, the exception it caught).
"""

from __future__ import annotations

WORKER = """
import json
import urllib.error
import urllib.request

import httpx
import requests
import urllib3
from workers import Response, fetch


def out(value):
    return Response(json.dumps(value), headers={"content-type": "application/json"})


def failure(exc):
    return {"error": type(exc).__name__, "message": str(exc)}


async def on_fetch(request, env):
    up = request.headers.get("x-upstream")
    route = request.url.split("/", 3)[3]
    route, _, arg = route.partition("?")

    if route == "requests-get":
        r = requests.get(up + "/echo?a=1", headers={"x-sent": "yes"})
        return out({"status": r.status_code, "reason": r.reason, "echo": r.json(),
                    "x-upstream": r.headers["X-Upstream"], "cookie": r.cookies.get("flavour"),
                    "url": r.url})
    if route == "requests-post":
        s = requests.Session()
        return out({
            "json": s.post(up + "/echo", json={"k": [1, 2]}).json(),
            "form": s.post(up + "/echo", data={"a": "b c"}).json(),
            "bytes": s.put(up + "/echo", data=b"\\x00raw").json(),
            "large": s.post(up + "/echo", data=b"u" * 300_000).json(),
        })
    if route == "requests-redirect":
        followed = requests.get(up + "/redirect?to=/echo")
        manual = requests.get(up + "/redirect?to=/echo", allow_redirects=False)
        history = [h.status_code for h in followed.history]
        return out({"status": followed.status_code, "history": history,
                    "path": followed.json()["path"], "manual": manual.status_code,
                    "location": manual.headers["location"]})
    if route == "requests-stream":
        r = requests.get(up + "/chunks?n=5", stream=True)
        chunks = [c.decode() for c in r.iter_content(chunk_size=None)]
        big = requests.get(up + "/big?n=700000")
        teapot = requests.get(up + "/status/418")
        return out({"chunks": chunks, "big": len(big.content), "status": teapot.status_code})
    if route == "requests-timeout":
        try:
            requests.get(up + "/never", timeout=0.5)
        except requests.Timeout as exc:
            return out({"caught": "Timeout", **failure(exc)})
        return out({"caught": None})
    if route == "requests-many":
        results = []
        for i in range(int(arg)):
            try:
                results.append(requests.get(up + f"/status/200?i={i}").status_code)
            except requests.ConnectionError as exc:
                results.append(failure(exc))
        return out(results)
    if route == "urllib3":
        pool = urllib3.PoolManager()
        r = pool.request("POST", up + "/echo", json={"z": 1}, headers={"x-sent": "u3"})
        streamed = pool.request("GET", up + "/chunks?n=4", preload_content=False)
        parts = [p.decode() for p in streamed.stream(8)]
        streamed.release_conn()
        return out({"status": r.status, "echo": r.json(), "parts": "".join(parts),
                    "redirected": pool.request("GET", up + "/redirect?to=/echo").json()["path"]})
    if route == "httpx-sync":
        with httpx.Client() as client:
            r = client.post(up + "/echo", content=b"hx", headers={"x-sent": "hx"})
            redirect = client.get(up + "/redirect?to=/echo")
            followed = client.get(up + "/redirect?to=/echo", follow_redirects=True)
            with client.stream("GET", up + "/chunks?n=3") as s:
                chunks = [c.decode() for c in s.iter_raw()]
            teapot = client.get(up + "/status/418")
            try:
                client.get(up + "/never", timeout=0.5)
                timeout = None
            except httpx.TimeoutException as exc:
                timeout = type(exc).__name__
        return out({"status": r.status_code, "echo": r.json(), "redirect": redirect.status_code,
                    "followed": followed.json()["path"], "chunks": chunks, "timeout": timeout,
                    "teapot": [teapot.status_code, teapot.reason_phrase, teapot.text]})
    if route == "httpx-async":
        async with httpx.AsyncClient() as client:
            r = await client.get(up + "/echo?via=async")
            async with client.stream("GET", up + "/chunks?n=3") as s:
                chunks = [c.decode() async for c in s.aiter_raw()]
        return out({"status": r.status_code, "echo": r.json(), "chunks": chunks})
    if route == "aiohttp":  # only where aiohttp is installed
        import aiohttp
        jar = aiohttp.CookieJar(unsafe=True)  # (the default jar ignores cookies of IP hosts)
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            async with session.post(up + "/echo?via=aiohttp", json={"a": 1}) as r:
                echo = await r.json()
            async with session.get(up + "/redirect?to=/echo") as r:
                redirected = [str(r.url), [h.status for h in r.history]]
            async with session.get(up + "/chunks?n=3") as r:
                chunks = [c.decode() async for c in r.content.iter_any()]
            async with session.get(up + "/big?n=700000") as r:
                big = len(await r.read())
            try:
                async with session.get(up + "/never", timeout=aiohttp.ClientTimeout(total=0.5)):
                    timeout = None
            except TimeoutError as exc:
                timeout = type(exc).__name__
            cookie = session.cookie_jar.filter_cookies(up)["flavour"].value
        return out({"echo": echo, "redirected": redirected, "chunks": chunks, "big": big,
                    "timeout": timeout, "cookie": cookie})
    if route == "urllib":
        try:
            urllib.request.urlopen(up + "/echo")
        except urllib.error.URLError as exc:
            return out({"caught": "URLError", "reason": str(exc.reason)})
        return out({"caught": None})
    if route == "refused":
        results = {}
        try:
            requests.get(up + "/echo")
        except requests.ConnectionError as exc:
            results["requests"] = failure(exc)
        try:
            urllib3.PoolManager(retries=False).request("GET", up + "/echo")
        except urllib3.exceptions.HTTPError as exc:
            results["urllib3"] = failure(exc)
        try:
            httpx.get(up + "/echo")
        except httpx.ConnectError as exc:
            results["httpx"] = failure(exc)
        try:
            async with httpx.AsyncClient() as client:
                await client.get(up + "/echo")
        except httpx.ConnectError as exc:
            results["httpx-async"] = failure(exc)
        try:
            import aiohttp
        except ImportError:
            aiohttp = None
        if aiohttp is not None:
            try:
                async with aiohttp.ClientSession() as session:
                    await session.get(up + "/echo")
            except aiohttp.ClientConnectorError as exc:
                results["aiohttp"] = failure(exc)
        return out(results)
    if route == "hold":
        reply = await fetch(up + "/hold?key=" + arg)
        return out({"held": await reply.text()})
    if route == "release":
        opened = requests.get(up + "/release?key=" + arg).text
        # Still blocking while the held request's reply arrives: this call's pump reads it.
        chunks = requests.get(up + "/chunks?n=5").text
        return out({"release": opened, "then": chunks})
    if route == "raw-socket":  # what the libraries did before: a socket of the isolate's own
        import socket
        host, port = up.split("//", 1)[1].rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as exc:
            return out(failure(exc))
        return out({"error": None})
    if route == "never":
        requests.get(up + "/never")  # no timeout: only a cancel of this request ends it
        return out({"never": "answered"})
    if route == "mixed":
        sync = requests.get(up + "/echo?n=" + arg).json()["query"]["n"]
        reply = await fetch(up + "/echo?n=" + arg)
        return out({"sync": sync, "async": json.loads(await reply.text())["query"]["n"]})
    return Response("no such route", status=404)
"""
