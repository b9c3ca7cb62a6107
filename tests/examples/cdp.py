"""Headless Chromium driven over the DevTools protocol (a websocket), for browser tests.

Launched with the flags that keep it off the network except for the pages the test opens, and
a fresh empty profile. ``Browser.page()`` is one tab: ``navigate``, ``evaluate`` JavaScript,
``click`` an element where a person would (mouse events at its centre), ``type`` text.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One tab, over its own DevTools websocket."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        await self._socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(await self._socket.recv())
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def navigate(self, url: str, timeout: float = 30) -> None:
        await self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while await self.evaluate("document.readyState") != "complete":
            assert time.monotonic() < deadline, f"{url} did not load"
            await asyncio.sleep(0.05)

    async def click(self, selector: str) -> None:
        box = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    async def type(self, selector: str, text: str) -> None:
        await self.click(selector)
        await self.send("Input.insertText", text=text)


class Browser:
    """A headless Chromium process with an empty profile under ``profile``."""

    def __init__(self, profile: Path) -> None:
        binary = chromium_path()
        assert binary is not None, "chromium is not installed (scripts/test.d/chromium.sh)"
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            assert self.process.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.05)
        self.port = int(port_file.read_text().split()[0])

    async def page(self) -> tuple[Page, Any]:
        targets = httpx.get(f"http://127.0.0.1:{self.port}/json/list", timeout=10).json()
        target = next(t for t in targets if t["type"] == "page")
        socket = await websockets.connect(target["webSocketDebuggerUrl"], max_size=None)
        page = Page(socket)
        await page.send("Page.enable")
        return page, socket

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
