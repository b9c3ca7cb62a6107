"""The Python tabs of developers.cloudflare.com/workers/examples/ (``cf_examples/``, one file
per page, as published) and a way to point their outbound URLs at a loopback upstream."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).parent / "cf_examples"


def example(name: str, **urls: str) -> str:
    """The example's source with each published URL (a ``urls`` key) replaced by its value."""
    source = (EXAMPLES / f"{name}.py").read_text()
    for published, local in urls.items():
        assert published in source, published
        source = source.replace(published, local)
    return source
