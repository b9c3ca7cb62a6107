"""A replica's slot limit given as a backend flag in its ``args``."""

from __future__ import annotations

from ember.errors import ConfigError

# The backends' flags for how many requests a replica runs at once (SGLang's, vLLM's).
SLOT_FLAGS = ("--max-running-requests", "--max-num-seqs")


def slots_from_args(
    args: list[str], running: int | None, file: str, where: str
) -> tuple[list[str], int | None]:
    """A slot limit given as a flag in ``args`` becomes ``max_running_requests`` (the launch
    command writes it back): the pool counts a replica's slots from the key, and with the flag
    alone it sent a one-slot replica 128 requests at once. The flag and the key must agree."""
    kept: list[str] = []
    found: str | None = None
    items = iter(args)
    for arg in items:
        name, equals, inline = arg.partition("=")
        if name not in SLOT_FLAGS:
            kept.append(arg)
            continue
        found = inline if equals else next(items, "")
    if found is None:
        return kept, running
    if not found.isdigit() or not 1 <= int(found) <= 100_000:
        raise ConfigError(file, f"{where}.args", found, "--max-running-requests from 1 to 100000")
    if running is not None and running != int(found):
        raise ConfigError(
            file,
            f"{where}.max_running_requests",
            running,
            f"the same as --max-running-requests {found} in args (or only one of them)",
        )
    return kept, int(found)
