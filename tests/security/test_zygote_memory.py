"""No deployment's data passes through the zygote (isolation.md pitfall 13).

Every isolate is forked from one zygote, so whatever bytes a spawn left in the zygote's heap
(freed msgpack buffers and strings keep their bytes) every isolate forked later inherits. The
attack (walk18): tenant B's handler reads its own memory (``/proc/self/maps`` and
``ctypes.string_at``) and finds tenant A's vars, deployment id and code path. Here A is
deployed with a var holding a random canary under a directory named with another, A's isolate
is started, then B's; B scans its own readable memory, and the test scans the zygote's memory
itself (``/proc/<pid>/mem``, same uid). Both run against the sandboxed supervisor (FULL: what
this host offers) and ember dev's (no sandbox).

B cannot be told A's canaries (they would then be in its memory): every canary starts with
``PREFIX`` and B reports the 32 characters that follow each occurrence it finds. B has a canary
var of its own, which it must find: the scan is shown to see what it looks for.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.isolation import SandboxPolicy
from ember.runtime.sandbox import FULL
from tests.runtime.harness import Harness, write_project

PREFIX = "zygcanary"

VICTIM = """
import json
import hashlib
import json
import os
from workers import Response

async def fetch(request, env):
    names = ("PUBLIC_VAR", "DB_URL", "SETTINGS")
    return Response(json.dumps({
        "env": {name: getattr(env, name) for name in names},
        "environ": {name: os.environ.get(name) for name in names},
    }))
"""

SCANNER = """
import ctypes
import json
from workers import Response

MARK = b"zyg" + b"canary"
CHUNK = 1 << 20

def regions():
    # Anonymous memory (the heap, pymalloc arenas, stacks): where freed buffers and strings
    # keep their bytes. File-backed mappings are skipped: reading past a file's end is SIGBUS.
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            path = fields[5] if len(fields) > 5 else ""
            if fields[1][0] != "r" or (path and path not in ("[heap]", "[stack]")
                                       and not path.startswith("[anon")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            yield start, end

def scan():
    found, scanned = set(), 0
    for start, end in list(regions()):
        for at in range(start, end, CHUNK):
            data = ctypes.string_at(at, min(CHUNK + 64, end - at))
            scanned += len(data)
            index = data.find(MARK)
            while index >= 0:
                tail = data[index + len(MARK):index + len(MARK) + 32]
                found.add(tail.decode("ascii", "replace"))
                index = data.find(MARK, index + 1)
    return found, scanned

async def fetch(request, env):
    found, scanned = scan()
    return Response(json.dumps({"found": sorted(found), "scanned": scanned, "own": env.OWN}))
"""


def _harness(kind: str, base: Path) -> Harness:
    if kind == "dev":
        return Harness(base / "state")
    return Harness(base / "state", dev=False, sandbox=SandboxPolicy(default_profile=FULL))


@pytest.fixture(params=["sandbox", "dev"])
def harness_and_base(request: pytest.FixtureRequest) -> Iterator[tuple[Harness, Path]]:
    # Not under pytest's 0700 temp root: a pool uid must be able to reach the code by host
    # path when there is no mount namespace (see conftest._platform).
    base = Path(tempfile.mkdtemp(prefix=f"ember-zygote-memory-{request.param}-"))
    base.chmod(0o711)
    harness = _harness(request.param, base)
    try:
        yield harness, base
    finally:
        harness.close()
        shutil.rmtree(base, ignore_errors=True)


def memory_of(pid: int) -> Iterator[bytes]:
    """Every readable mapping of process ``pid``, read through ``/proc/<pid>/mem``."""
    with open(f"/proc/{pid}/maps") as maps:
        lines = maps.read().splitlines()
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        for line in lines:
            fields = line.split()
            if fields[1][0] != "r" or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                yield os.pread(fd, end - start, start)
            except OSError:
                continue  # a file-backed page past the file's end
    finally:
        os.close(fd)


def test_no_deployment_data_reaches_the_zygote_or_later_isolates(
    harness_and_base: tuple[Harness, Path],
) -> None:
    harness, base = harness_and_base
    var_token, db_token, dir_token, own_token = (secrets.token_hex(16) for _ in range(4))
    victim_root = write_project(
        base / f"{PREFIX}{dir_token}",
        VICTIM,
        f"vars:\n  PUBLIC_VAR: {PREFIX}{var_token}\n  DB_URL: postgres://admin:{PREFIX}{db_token}"
        "@db/x\n  SETTINGS: {depth: 2, name: deep}\n",
    )
    victim_id = harness.deploy(victim_root)
    with harness.client(victim_id) as client:
        reply = client.get("/")
    assert reply.status_code == 200, reply.text
    # Vars reach the handler as before: env.NAME, and os.environ (JSON values as JSON text).
    assert reply.json() == {
        "env": {
            "PUBLIC_VAR": f"{PREFIX}{var_token}",
            "DB_URL": f"postgres://admin:{PREFIX}{db_token}@db/x",
            "SETTINGS": {"depth": 2, "name": "deep"},
        },
        "environ": {
            "PUBLIC_VAR": f"{PREFIX}{var_token}",
            "DB_URL": f"postgres://admin:{PREFIX}{db_token}@db/x",
            "SETTINGS": '{"depth":2,"name":"deep"}',
        },
    }

    scanner_root = write_project(base / "scanner", SCANNER, f"vars:\n  OWN: {PREFIX}{own_token}\n")
    scanner_id = harness.deploy(scanner_root)
    with harness.client(scanner_id, timeout=60) as client:
        reply = client.get("/")
    assert reply.status_code == 200, reply.text
    scan = reply.json()
    assert scan["own"] == f"{PREFIX}{own_token}"
    assert own_token in scan["found"], "the scan does not see the isolate's own var"
    tokens = {"var": var_token, "db var": db_token, "directory": dir_token}
    in_isolate = sorted(name for name, token in tokens.items() if token in scan["found"])

    zygote = harness.supervisor.spawner.zygote_pid
    assert zygote is not None
    needles = {
        "var": f"{PREFIX}{var_token}".encode(),
        "db var": db_token.encode(),
        "deployment id": victim_id.encode(),
        "code path": str(victim_root).encode(),
        "directory": dir_token.encode(),
        "scanner's var": own_token.encode(),
    }
    control = b"ember.runtime.sandbox_hook"  # the zygote's own hook target: always there
    in_zygote, seen_control = set(), False
    for chunk in memory_of(zygote):
        in_zygote |= {name for name, needle in needles.items() if needle in chunk}
        seen_control = seen_control or control in chunk
    assert seen_control, "the zygote scan does not see the zygote's own strings"
    assert (in_isolate, sorted(in_zygote)) == ([], []), (
        f"another deployment's data in a later isolate's memory: {in_isolate}; "
        f"deployment data in the zygote's memory: {sorted(in_zygote)}"
    )


BIG_VARS = """
import hashlib
import json
import os
from workers import Response

async def fetch(request, env):
    names = sorted(name for name in os.environ if name.startswith("BIG_"))
    seen = {"env": [getattr(env, n) for n in names], "environ": [os.environ[n] for n in names]}
    return Response(hashlib.sha256(json.dumps(seen).encode()).hexdigest())
"""


def test_vars_larger_than_the_socket_buffer_reach_the_handler(
    harness_and_base: tuple[Harness, Path],
) -> None:
    # The spec (vars twice with a sandbox: the child's environment and the sandbox's) is written
    # on the isolate socket before the child exists; what does not fit follows after the fork.
    # The most a deployment may have: 128 vars of 5 KiB, more than a socket's buffer.
    harness, base = harness_and_base
    values = {f"BIG_{index:03}": secrets.token_hex(2550) for index in range(128)}
    config = "vars:\n" + "".join(f"  {name}: {value}\n" for name, value in values.items())
    root = write_project(base / "big", BIG_VARS, config)
    with harness.client(harness.deploy(root)) as client:
        reply = client.get("/")
    assert reply.status_code == 200, reply.text
    ordered = [values[name] for name in sorted(values)]
    expected = json.dumps({"env": ordered, "environ": ordered})
    assert reply.text == hashlib.sha256(expected.encode()).hexdigest()
