"""The integrity checker's native decode loops (``engine/integrity_native.py``) against the numpy
code they replace, on fresh random input: the ownership count, the flush of a run of decode
steps and the sampled content check."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ember.models.engine.integrity import IntegrityChecker
from ember.models.engine.integrity_native import NativeLoops
from ember.models.engine.integrity_types import StepReads
from ember.models.engine.integrity_walk import PendingContent, positions_and_chains
from ember.models.engine.sequence import Sequence, StopCriteria
from ember.models.kernels import integrity_ops
from ember.models.kv.integrity import KVSidecar
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec

pytestmark = pytest.mark.kernels

PAGE = 4


@pytest.fixture(scope="module", params=["module", "ctypes"])
def ops(request: pytest.FixtureRequest) -> integrity_ops.IntegrityOps:
    """Both bindings of the same loops: the extension module and ctypes."""
    loaded = integrity_ops.load(module=request.param == "module")
    assert loaded is not None, "the test machine has a C compiler"
    assert loaded.binding == request.param, "the test machine has Python's headers"
    return loaded


def _sidecar(num_pages: int) -> KVSidecar:
    pool = KVPool(KVSpec("mla", 1, "bf16", kv_lora_rank=4, qk_rope_head_dim=4), num_pages, PAGE)
    assert pool.sidecar is not None
    return pool.sidecar


def test_sequence_keeps_its_chain_buffers_address() -> None:
    seq = Sequence(0, "a", [1, 2, 3], StopCriteria(max_tokens=100))
    for token in range(60):  # grows the buffer (reallocations) several times
        seq.append_token(token)
        assert seq.chain_address == seq.chain_buffer.ctypes.data


def test_native_count_equals_the_numpy_count(ops: integrity_ops.IntegrityOps) -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        num_pages = int(rng.integers(2, 300))
        sidecar = _sidecar(num_pages)
        sidecar.epoch = int(rng.integers(0, 5))
        num_pages = sidecar.page_epoch.size  # with the pool's padding page
        sidecar.page_epoch[:] = rng.integers(-1, 6, size=num_pages)
        pages = rng.integers(0, num_pages, size=(int(rng.integers(1, 9)), int(rng.integers(1, 9))))
        native = NativeLoops(ops, sidecar).count_restamped(pages.ctypes.data, pages.size)
        assert native == np.count_nonzero(sidecar.page_epoch[pages] == sidecar.epoch)
    pages = np.array([0, num_pages], dtype=np.int64)
    with pytest.raises(ValueError):
        NativeLoops(ops, sidecar).count_restamped(pages.ctypes.data, 2)


def test_only_own_restamps_native_equals_numpy(ops: integrity_ops.IntegrityOps) -> None:
    """The checker's decode fast path with the native count and with numpy's: same verdicts."""
    rng = np.random.default_rng(2)
    verdicts = set()
    for _ in range(200):
        sidecar = _sidecar(40)
        sidecar.epoch = 3
        sidecar.restamp_epoch = 3
        sidecar.page_epoch[:] = rng.choice([1, 2, 3], size=41, p=[0.45, 0.45, 0.1])
        table = rng.choice(39, size=(6, 4), replace=rng.random() < 0.3).astype(np.int64)
        own = [int(p) * PAGE for p in table[rng.random(6) < 0.4, -1]]
        plain = IntegrityChecker(sidecar, PAGE, "sampled", 64)
        fast = IntegrityChecker(sidecar, PAGE, "sampled", 64, ops)
        want = plain.only_own_restamps(table, own)
        assert fast.only_own_restamps(table, own, table.ctypes.data) == want
        verdicts.add(want)
    assert verdicts == {True, False}


def _run(rng: random.Random, sidecar: KVSidecar, rows: int, steps: int) -> list[PendingContent]:
    """A run of ``steps`` decode steps of ``rows`` sequences, each writing random slots (some
    slot written twice, some page cleared between its writes and the flush)."""
    seqs = []
    for i in range(rows):
        prompt = [rng.randrange(97) for _ in range(rng.randint(1, 40))]
        seq = Sequence(i, str(i), prompt, StopCriteria(max_tokens=100))
        seqs.append(seq)
    first = [seq.num_tokens - 1 for seq in seqs]
    for _ in range(steps):
        for seq in seqs:
            seq.append_token(rng.randrange(97))  # reallocates some chain buffers mid-run
    pending = []
    for step in range(steps):
        slots = np.array(
            [rng.randrange(sidecar.num_slots) for _ in range(rows)], dtype=np.int64
        )  # repeats across steps: a later write of a slot wins
        positions = [p + step for p in first]
        entry = PendingContent(slots, positions, 10 + step, None, seqs, slots.ctypes.data)
        pending.append(entry)
    cleared = rng.sample(range(len(sidecar.cleared_epoch)), len(sidecar.cleared_epoch) // 4)
    sidecar.cleared_epoch[cleared] = [rng.randrange(8, 10 + steps + 2) for _ in cleared]
    return pending


def test_native_flush_of_a_decode_run_equals_the_reference(ops: integrity_ops.IntegrityOps) -> None:
    rng = random.Random(3)
    for _ in range(60):
        num_pages = rng.randint(4, 60)
        rows, steps = rng.randint(1, 9), rng.randint(1, 18)
        plain, native = _sidecar(num_pages), _sidecar(num_pages)
        pending = _run(rng, plain, rows, steps)
        native.cleared_epoch[:] = plain.cleared_epoch
        digests = np.array([rng.getrandbits(64) for _ in range(rows * steps)], dtype=np.uint64)
        positions, chains = positions_and_chains(pending, plain.chain)
        slots = np.concatenate([p.slots for p in pending])
        epochs = np.repeat([p.epoch for p in pending], rows)
        plain.apply_content(slots, digests, positions, epochs, chains)
        assert NativeLoops(ops, native).flush_run(pending, digests)
        assert np.array_equal(native.chain, plain.chain)
        assert np.array_equal(native.position, plain.position)
        assert np.array_equal(native.digest, plain.digest)


def test_native_flush_declines_what_is_not_one_run(ops: integrity_ops.IntegrityOps) -> None:
    rng = random.Random(4)
    sidecar = _sidecar(20)
    pending = _run(rng, sidecar, 3, 4)
    digests = np.zeros(12, dtype=np.uint64)
    loops = NativeLoops(ops, sidecar)
    before = sidecar.chain.copy()
    other = list(pending[1].readers or [])  # the same sequences, another list: not one run
    mixed = [pending[0], PendingContent(**{**_fields(pending[1]), "readers": other})]
    assert not loops.flush_run(mixed + pending[2:], digests)
    skipped = [pending[0], pending[2]]  # positions two apart: not one token a step
    assert not loops.flush_run(skipped, digests[:6])
    unknown = [PendingContent(**{**_fields(p), "address": 0}) for p in pending]
    assert not loops.flush_run(unknown, digests)
    assert not loops.flush_run(pending, digests[:11])  # digests of another shape
    assert np.array_equal(sidecar.chain, before)  # nothing written


def _fields(entry: PendingContent) -> dict:
    return {name: getattr(entry, name) for name in PendingContent.__slots__}


def test_native_sampled_check_agrees_with_the_reference(ops: integrity_ops.IntegrityOps) -> None:
    """``columns_pass`` against ``_check_pages``' verdict on random reads, with faults injected
    (another writer's chain in a slot, a changed stamp, a changed sample digest) or none."""
    rng = np.random.default_rng(5)
    outcomes = {True: 0, False: 0}
    for _ in range(300):
        num_pages, readers, width = 50, int(rng.integers(1, 7)), int(rng.integers(1, 6))
        sidecar = _sidecar(num_pages)
        checker = IntegrityChecker(sidecar, PAGE, "sampled", 64, ops)
        tables = rng.choice(num_pages - 1, size=(readers, width), replace=False).astype(np.int64)
        lens = [int(rng.integers((width - 1) * PAGE + 1, width * PAGE + 1)) for _ in tables]
        chains = [rng.integers(1, 1 << 62, size=width * PAGE, dtype=np.uint64) for _ in tables]
        for table, chain, length in zip(tables, chains, lens, strict=True):
            slots = (table[:, None] * PAGE + np.arange(PAGE)).ravel()
            sidecar.chain[slots] = np.where(np.arange(slots.size) < length, chain, 0)
            sidecar.digest[slots[:length]] = rng.integers(0, 1 << 63, size=length, dtype=np.uint64)
        first, step = int(rng.integers(0, width)), int(rng.integers(1, 4))
        rows, cols = checker._columns(readers, width, first, step)
        sample = sidecar.stamped_page_digest(tables[rows, cols])
        fault = rng.integers(0, 4)
        if fault == 1:  # a slot of a sampled page written by another sequence
            sidecar.chain[tables[rows[0], cols[0]] * PAGE + int(rng.integers(0, PAGE))] ^= 1
        elif fault == 2:  # a stamp changed
            sidecar.digest[tables[rows[-1], cols[-1]] * PAGE] += np.uint64(1)
        elif fault == 3:  # the bytes changed
            sample[int(rng.integers(0, len(sample)))] ^= np.uint64(1 << 7)
        reads = StepReads(
            pages=tables,
            seq_lens=lens,
            chains=chains,
            seq_index=list(range(readers)),
            chain_addresses=[chain.ctypes.data for chain in chains],
            chain_capacities=[len(chain) for chain in chains],
        )
        want = not checker._check_pages(reads, rows, cols, content=True, digest=sample)
        addresses, capacities = reads.chain_addresses, reads.chain_capacities
        got = checker.native.columns_pass(tables, first, step, lens, addresses, capacities, sample)
        assert got == want
        outcomes[want] += 1
    assert outcomes[True] > 30 and outcomes[False] > 30
    short = [c - 1 for c in capacities]  # a reader's length past its chain buffer: refused
    with pytest.raises(ValueError):
        checker.native.columns_pass(tables, first, step, capacities, addresses, short, sample)


@pytest.mark.parametrize(
    "spec",
    [
        KVSpec("gqa", 3, "bf16", num_kv_heads=2, head_dim=8, v_head_dim=2),  # 16, 4 bytes
        KVSpec("gqa", 2, "fp8_e4m3", num_kv_heads=2, head_dim=3, v_head_dim=6),  # 3, 6 bytes
        KVSpec("mla", 3, "bf16", kv_lora_rank=4, qk_rope_head_dim=4, index_head_dim=8),
    ],
    ids=["gqa-bf16", "gqa-fp8", "dsa-bf16"],
)
def test_native_page_digest_equals_the_sidecars(ops: integrity_ops.IntegrityOps, spec) -> None:
    """``page_digest`` over some layers (a DSA indexer's, which no gather reads) against
    ``KVSidecar.page_digest``, on pools of random bytes."""
    rng = np.random.default_rng(6)
    pool = KVPool(spec, 30, PAGE)
    sidecar = pool.sidecar
    assert sidecar is not None
    for words in sidecar.layer_words:
        words.view(np.uint8)[...] = rng.integers(0, 256, size=words.view(np.uint8).shape)
    loops = NativeLoops(ops, sidecar)
    every = [(c, layer) for c, n in enumerate(sidecar.cache_layers) for layer in range(n)]
    for _ in range(30):
        parts = [every[i] for i in sorted(rng.choice(len(every), rng.integers(1, 4)))]
        pages = rng.integers(0, 31, size=int(rng.integers(1, 12)))
        found = loops.page_digest(pages, parts)
        assert found is not None
        assert np.array_equal(found, sidecar.page_digest(pages, parts))


def test_the_module_build_declines_without_headers_or_kernels(monkeypatch, tmp_path) -> None:
    """No Python headers (or ``EMBER_KERNELS=0``): no module, and ``load`` falls back to the
    ctypes library (or to nothing: the numpy path)."""
    import sysconfig

    monkeypatch.setenv("EMBER_KERNEL_CACHE", str(tmp_path))  # a fresh memo key
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path / "none")})
    loaded = integrity_ops.load()
    assert loaded is not None and loaded.binding == "ctypes"
    monkeypatch.setenv("EMBER_KERNELS", "0")
    assert integrity_ops.load() is None
