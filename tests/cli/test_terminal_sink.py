"""``ember dev``'s request log: lines written together, in order, even with unbuffered stdout."""

from __future__ import annotations

import asyncio

import pytest

from ember.cli.dev import FLUSH_EVERY_S, TerminalSink
from ember.runtime.events import ConsoleEvent, RequestEvent


class CountingStdout:
    """An unbuffered stdout (as under PYTHONUNBUFFERED=1): each ``write`` would be a syscall."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str | bytes) -> int:  # (click.echo may write bytes)
        self.writes.append(text.decode() if isinstance(text, bytes) else text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _request(index: int) -> RequestEvent:
    return RequestEvent("dep", "GET", f"http://127.0.0.1:8787/r{index}", 200, 1.5, 0.1, "ok")


def test_request_lines_are_written_together_and_before_later_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stdout = CountingStdout()
    monkeypatch.setattr("sys.stdout", stdout)

    async def main() -> None:
        sink = TerminalSink()
        for index in range(50):
            sink.emit(_request(index))
        assert stdout.writes == []  # nothing per request
        await asyncio.sleep(FLUSH_EVERY_S * 5)
        assert len(stdout.writes) == 1
        assert stdout.writes[0].splitlines() == [f"GET /r{i} 200 (1.5ms)" for i in range(50)]
        sink.emit(_request(50))
        sink.emit(ConsoleEvent("dep", "log", "printed after request 50"))
        assert "".join(stdout.writes[1:]).splitlines() == [
            "GET /r50 200 (1.5ms)",
            "printed after request 50",
        ]
        sink.emit(_request(51))
        sink.flush()  # as ember dev does when it stops
        assert stdout.writes[-1] == "GET /r51 200 (1.5ms)\n"

    asyncio.run(main())


def test_a_long_request_target_is_cut_with_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 16 KB URL (the most the router lets through) is one readable line, not 16 KB of query
    on the terminal per request: its start, an ellipsis and its full length."""
    stdout = CountingStdout()
    monkeypatch.setattr("sys.stdout", stdout)
    target = "/search?q=" + "x" * 16_000

    async def main() -> None:  # the sink schedules its flush on the running loop
        sink = TerminalSink()
        origin = "http://127.0.0.1:8787"
        sink.emit(RequestEvent("dep", "GET", origin + target, 200, 1.5, 0.1, "ok"))
        sink.emit(RequestEvent("dep", "GET", origin + "/" + "a" * 299, 404, 1.5, 0, "ok"))
        sink.flush()

    asyncio.run(main())
    lines = "".join(stdout.writes).splitlines()
    assert lines[0] == f"GET {target[:300]}… (16010 characters) 200 (1.5ms)"
    assert lines[1] == f"GET /{'a' * 299} 404 (1.5ms)"  # 300 characters: shown whole
