"""The command line of a launched replica: an ember model server or an SGLang server.

Both listen on 127.0.0.1 on a port the pool picked, serve the model under its Workers AI id
(``--served-model-name``), and get the same knobs under the same flag names (the ember server's
flags are SGLang's): ``--kv-cache-dtype``, ``--quantization``, ``--max-running-requests``;
SGLang also gets ``--tp`` and the tool-call and reasoning parsers of the model's family, and sees
only its GPUs (``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ember.models.pool.config import ReplicaConfig

# The directory holding the ``ember`` package: a child started with ``-m ember`` must import the
# same code as the pool, installed or not.
EMBER_ROOT = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ModelSource:
    """What a launched replica serves: the id, and the checkpoint when the id is overridden."""

    model_id: str
    checkpoint: Path | None  # None: the id resolves through the server's own catalog
    family: str  # "kimi" | "glm"
    tool_call_parser: str  # SGLang's name: kimi_k2 | glm45 | glm47
    reasoning_parser: str  # kimi_k2 | glm45
    context_window: int | None = None


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    """argv and environment of one replica process."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def shell(self) -> str:
        """The command as one line (for logs and ``ember ai models``)."""
        import shlex

        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items() if k != "PYTHONPATH")
        line = " ".join(shlex.quote(a) for a in self.argv)
        return f"{prefix} {line}".strip()


def free_port() -> int:
    """A TCP port nobody listens on right now (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def ember_command(
    replica: ReplicaConfig,
    source: ModelSource,
    port: int,
    *,
    python: str = sys.executable,
    torch_threads: int | None = None,
) -> LaunchCommand:
    """``python -m ember models serve MODEL --port P --device D ...``."""
    model = str(source.checkpoint) if source.checkpoint is not None else source.model_id
    # -P: the replica's working directory (a project's, in ember dev) is not on its import
    # path, so a project folder named ``ember`` is never imported in its stead.
    argv = [python, "-P", "-m", "ember", "models", "serve", model]
    argv += ["--host", HOST, "--port", str(port), "--device", replica.device]
    argv += ["--served-model-name", replica.served_model_name or source.model_id]
    if source.checkpoint is not None:
        # A bare directory has no catalog entry: say which family's tool syntax it speaks.
        argv += ["--tool-call-parser", source.tool_call_parser]
        if source.context_window is not None:
            argv += ["--context-length", str(source.context_window)]
    _common(argv, replica)
    if torch_threads is not None and "--torch-threads" not in replica.args:
        argv += ["--torch-threads", str(torch_threads)]
    argv += replica.args
    env = {"PYTHONPATH": _pythonpath()}
    env.update(replica.env)
    return LaunchCommand(tuple(argv), env, port)


def sglang_command(
    replica: ReplicaConfig, source: ModelSource, port: int, *, python: str = sys.executable
) -> LaunchCommand:
    """``python -m sglang.launch_server --model-path ... --tp N --kv-cache-dtype ...``."""
    path = replica.model_path or (str(source.checkpoint) if source.checkpoint else None)
    if path is None:
        raise ValueError(f"{source.model_id}: an sglang replica needs model_path or a checkpoint")
    argv = [python, "-m", "sglang.launch_server", "--model-path", path]
    argv += ["--host", HOST, "--port", str(port)]
    argv += ["--served-model-name", replica.served_model_name or source.model_id]
    argv += ["--tp", str(replica.tp)]
    argv += ["--tool-call-parser", source.tool_call_parser]
    argv += ["--reasoning-parser", source.reasoning_parser]
    if source.context_window is not None:
        argv += ["--context-length", str(source.context_window)]
    _common(argv, replica)
    if source.family == "kimi":
        argv.append("--trust-remote-code")  # Kimi checkpoints ship their own tokenizer code
    argv += replica.args
    # PYTHONSAFEPATH (the environment's -P, Python 3.11+; older ones ignore it): the working
    # directory (a project's, in ember dev) is not on the import path of SGLang nor of the
    # processes it spawns, so a project folder named ``sglang`` or ``torch`` is never imported.
    env: dict[str, str] = {"PYTHONSAFEPATH": "1"}
    if ":" in replica.device:
        env["CUDA_VISIBLE_DEVICES"] = replica.device.split(":", 1)[1]
    env.update(replica.env)
    return LaunchCommand(tuple(argv), env, port)


def launch_command(
    replica: ReplicaConfig,
    source: ModelSource,
    port: int,
    *,
    python: str = sys.executable,
    torch_threads: int | None = None,
) -> LaunchCommand:
    """The command for ``replica``'s backend."""
    if replica.backend == "sglang":
        return sglang_command(replica, source, port, python=python)
    return ember_command(replica, source, port, python=python, torch_threads=torch_threads)


def _common(argv: list[str], replica: ReplicaConfig) -> None:
    if replica.kv_cache_dtype is not None:
        argv += ["--kv-cache-dtype", replica.kv_cache_dtype]
    if replica.quantization is not None and replica.quantization != "none":
        argv += ["--quantization", replica.quantization]
    if replica.max_running_requests is not None:
        argv += ["--max-running-requests", str(replica.max_running_requests)]


def _pythonpath() -> str:
    existing = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(EMBER_ROOT), existing) if p)


def family_parsers(family: str, model_id: str) -> tuple[str, str]:
    """(tool-call parser, reasoning parser) as SGLang names them, for a catalog family."""
    if family == "kimi":
        return "kimi_k2", "kimi_k2"
    if any(version in model_id for version in ("glm-4.5", "glm-4.6")):
        return "glm45", "glm45"
    return "glm47", "glm45"
