"""How the native paged decode kernel is built and what happens when it cannot be: no compiler
or a failing build leaves the torch path with one log line and nothing half-written, the
environment switch turns it off, and the library is cached per source and flags."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.kernels import build, paged_decode
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec

pytestmark = pytest.mark.kernels

PAGE = 4


def _decode_still_works(workspace: Workspace) -> None:
    spec = KVSpec("gqa", 1, "bf16", num_kv_heads=2, head_dim=8, v_head_dim=8)
    pool = KVPool(spec, num_pages=8, page_size=PAGE, integrity=False)
    batch = PagedBatch.build(BatchLayout((1, 1), (3, 5)), [[0], [1, 2]], PAGE, pool.padding_page)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 2, 8), torch.randn(2, 2, 8)
    out = PagedAttentionBackend(pool, batch, workspace).gqa(0, q, k, v, 0.3)
    assert out.shape == (2, 4, 8) and torch.isfinite(out).all()


def test_no_compiler_falls_back_to_torch_with_one_log_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EMBER_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with caplog.at_level(logging.WARNING, logger=paged_decode.__name__):
        workspace = Workspace()
        assert workspace.decode_kernel is None
        assert Workspace().decode_kernel is None  # memoised: built (or not) once per process
    lines = [r.getMessage() for r in caplog.records if r.name == paged_decode.__name__]
    assert len(lines) == 1 and "torch path" in lines[0] and "no C compiler" in lines[0]
    _decode_still_works(workspace)


def test_failing_build_falls_back_to_torch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "broken-cc"
    script = '#!/bin/sh\n[ "$1" = --version ] && echo broken 1.0 && exit 0\necho boom >&2\nexit 1\n'
    broken.write_text(script)
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EMBER_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(broken))
    with caplog.at_level(logging.WARNING, logger=paged_decode.__name__):
        workspace = Workspace()
    assert workspace.decode_kernel is None
    assert any("boom" in r.getMessage() for r in caplog.records)
    assert not list((tmp_path / "cache").glob("*.so"))  # nothing half-written left behind
    _decode_still_works(workspace)


def test_kernels_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_KERNELS", "0")
    assert paged_decode.load() is None and Workspace().decode_kernel is None


def test_library_is_cached_per_source_and_flags(tmp_path: Path) -> None:
    first = build.build(paged_decode.SOURCE, tmp_path)
    stamp = first.stat().st_mtime_ns
    assert build.build(paged_decode.SOURCE, tmp_path) == first
    assert first.stat().st_mtime_ns == stamp  # not rebuilt
    changed = tmp_path / "src" / "paged_decode.c"
    changed.parent.mkdir()
    changed.write_text(paged_decode.SOURCE.read_text() + "\n/* changed */\n")
    assert build.build(changed, tmp_path) != first
    assert os.path.dirname(first) == str(tmp_path)
