"""A stand-in for the runtime's zygote, run as its own process by test_zygote.py.

Started with a tiny explicit environment (plus a canary secret), it warms up the way the real
zygote will (asyncio with a running loop, msgpack, ember's sandbox preloaded; never torch),
forks a child that enters the anonymous profile, and relays what the worker reports, as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

import msgpack

from ember.runtime import sandbox


async def _handler() -> dict[str, object]:
    import decimal  # not imported by the zygote: the stdlib must be readable inside
    import importlib.util

    spec = importlib.util.spec_from_file_location("worker", "/app/worker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await asyncio.sleep(0.01)
    # fetch() decodes br in the isolate: brotli's C extension must load and work inside.
    from ember.runtime.isolate.encoding import EncodedBody

    encoded = bytes.fromhex("1b1000e0a5d2d872104324891c62ab7cf400")
    brotli_text = b"".join([piece async for piece in EncodedBody(encoded, "br")]).decode()
    return {
        "brotli": brotli_text,
        "pid": os.getpid(),
        "decimal": str(decimal.Decimal("1.10") + decimal.Decimal("2.20")),
        "fetch": await module.fetch(None, None),
        "environ": dict(os.environ),
        "torch_loaded": "torch" in sys.modules,
    }


def main() -> None:
    code_dir, uid = sys.argv[1], int(sys.argv[2])
    sandbox.preload()
    report = sandbox.probe()
    spec = sandbox.SandboxSpec.for_profile(
        sandbox.ANONYMOUS,
        report,
        deployment_id="zygote-test",
        code_dir=code_dir,
        env={"WORKER_VAR": "1"},
        uid=uid if uid > 0 else None,
    )
    loop = asyncio.new_event_loop()  # a warm loop with its selector and self-pipe fds
    loop.run_until_complete(asyncio.sleep(0))
    supervisor_end, worker_end = socket.socketpair()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            supervisor_end.close()
            os.close(report_r)
            sandbox.enter(spec, worker_end.fileno(), report_fd=report_w)
            result = asyncio.run(_handler())  # a fresh loop: the zygote's fds are closed
            worker_end.sendall(msgpack.packb(result))
        finally:
            os._exit(0)
    worker_end.close()
    os.close(report_w)
    startup = sandbox.read_startup(report_r)
    supervisor_end.settimeout(10)
    data = b""
    while chunk := supervisor_end.recv(65536):
        data += chunk
    _, status = os.waitpid(pid, 0)
    print(
        json.dumps(
            {
                "startup": {
                    "worker_pid": startup.worker_pid,
                    "monitor_pid": startup.monitor_pid,
                    "child": pid,
                    "layers": sorted(startup.applied.layers),
                },
                "worker": msgpack.unpackb(data),
                "exit": os.waitstatus_to_exitcode(status),
                "zygote_loop_closed": loop.is_closed(),
            }
        )
    )


if __name__ == "__main__":
    main()
