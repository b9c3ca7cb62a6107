"""``env.ASSETS`` answers of one deployment run at most a few at a time (the rest wait, none
fails) and an over-long URL is refused before any rule work (review18: 8 concurrent calls with
100 KB paths filled the process's executor and a victim's 4 MB asset took 39 s)."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ember.bindings.assets.rule_files import RedirectRule
from ember.bindings.assets.rule_match import Pattern
from ember.bindings.assets.rule_source import FixedRules
from ember.bindings.assets.rules import AssetRules
from ember.bindings.assets.service import MAX_CONCURRENT, AssetsService
from ember.bindings.base import BindingSpec, CallContext, ServiceHost


@dataclass
class _Context:
    root_path: str = ""


class _HeldPattern:
    """A rule pattern whose match waits until released, counting who is inside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.inside = 0
        self.most = 0
        self.calls = 0

    def match(self, host: str, path: str) -> dict[str, str] | None:
        with self.lock:
            self.calls += 1
            self.inside += 1
            self.most = max(self.most, self.inside)
        self.release.wait(30)
        with self.lock:
            self.inside -= 1
        return None


def _rules(pattern: _HeldPattern) -> AssetRules:
    rule = RedirectRule("/:a", "/b", 302, 1)
    return AssetRules(dynamic=((cast(Pattern, pattern), rule),))


def _service(tmp_path: Path, pattern: _HeldPattern) -> AssetsService:
    rules = _rules(pattern)
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "manifest.json").write_text(json.dumps({}))
    options = {"directory": str(tmp_path), "manifest": str(tmp_path / "manifest.json")}
    spec = BindingSpec("assets", "ASSETS", "m:f", options, {"rules": FixedRules(rules)})
    return AssetsService(spec, cast(ServiceHost, None))


def _fetch(service: AssetsService, url: str) -> Any:
    return service.call("fetch", ["GET", url, []], cast(CallContext, _Context()))


def test_one_deployments_calls_run_a_few_at_a_time_and_the_rest_wait(tmp_path: Path) -> None:
    rules = _HeldPattern()
    service = _service(tmp_path, rules)

    async def main() -> list[Any]:
        calls = [asyncio.ensure_future(_fetch(service, f"http://h/x{i}")) for i in range(10)]
        for _ in range(500):  # until the first ones are inside the rules
            if rules.inside >= MAX_CONCURRENT:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # room for any more to get in, were they let in
        inside = rules.inside
        rules.release.set()
        results = await asyncio.gather(*calls)
        assert inside == MAX_CONCURRENT
        return results

    results = asyncio.run(main())
    assert MAX_CONCURRENT == 4 and rules.most == MAX_CONCURRENT and rules.calls == 10
    assert [result[0] for result in results] == [404] * 10


def test_an_env_assets_url_past_16_kib_is_414_without_rule_work(tmp_path: Path) -> None:
    rules = _HeldPattern()
    rules.release.set()
    service = _service(tmp_path, rules)
    status, headers, body = asyncio.run(_fetch(service, "http://h/" + "-" * (16 * 1024)))
    assert (status, rules.calls) == (414, 0)
    assert b"414 Request-URI Too Large" in body and ["content-type", "text/html"] in headers
    status, _, _ = asyncio.run(_fetch(service, "http://h/" + "-" * (16 * 1024 - 1)))
    assert (status, rules.calls) == (404, 1)
