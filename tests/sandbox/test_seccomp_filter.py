"""The precompiled BPF fast path behaves exactly like libseccomp's own loader (the reference)."""

from __future__ import annotations

import errno
import json
import os
import socket
import threading

import pytest

from ember.runtime.sandbox import _linux, seccomp


def _outcome(call) -> str:  # noqa: ANN001
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, "?")
    return "ok"


def _probe_syscalls() -> dict[str, str]:
    def fork() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    def thread() -> None:
        worker = threading.Thread(target=lambda: None)
        worker.start()
        worker.join()

    return {
        "fork": _outcome(fork),
        "thread": _outcome(thread),
        "inet": _outcome(lambda: socket.socket(socket.AF_INET).close()),
        "inet6": _outcome(lambda: socket.socket(socket.AF_INET6).close()),
        "netlink": _outcome(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()),
        "unix": _outcome(lambda: socket.socket(socket.AF_UNIX).close()),
        "socketpair": _outcome(lambda: [s.close() for s in socket.socketpair()]),
        "execv": _outcome(lambda: os.execv("/bin/true", ["true"])),
        "unshare": _outcome(lambda: _linux.unshare(_linux.CLONE_NEWUSER)),
        "mount": _outcome(lambda: _linux.mount("tmpfs", "/tmp", "tmpfs", 0)),
        "dumpable": _outcome(lambda: _linux.prctl(_linux.PR_SET_DUMPABLE, 1)),
        "getpid": _outcome(os.getpid),
        "pipe": _outcome(lambda: [os.close(fd) for fd in os.pipe()]),
    }


def _in_child(load) -> dict[str, str]:  # noqa: ANN001
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            load()
            os.write(write_end, json.dumps(_probe_syscalls()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    data = os.read(read_end, 65536)
    os.close(read_end)
    os.waitpid(pid, 0)
    return json.loads(data)


def test_compiled_filter_matches_libseccomp_loader() -> None:
    pyseccomp, why = seccomp.load_pyseccomp()
    if pyseccomp is None:
        pytest.skip(why)
    program, skipped = seccomp.compiled(pyseccomp)
    assert len(program) % 8 == 0 and skipped == ()
    reference = _in_child(lambda: seccomp.install(pyseccomp))
    fast = _in_child(lambda: seccomp.load_compiled(program))
    assert fast == reference
    assert reference["fork"] == reference["execv"] == reference["unshare"] == "EPERM"
    assert reference["inet"] == reference["netlink"] == "EACCES"
    assert reference["thread"] == reference["unix"] == reference["getpid"] == "ok"
    assert reference["dumpable"] == reference["mount"] == "EPERM"


def test_load_compiled_rejects_garbage() -> None:
    with pytest.raises(OSError):
        seccomp.load_compiled(b"\x00" * 7)
