"""Compile a C source shipped in this package into a shared library, once per machine, cached.

No build step at install time and no new dependency: the first use runs the system C compiler
(``$CC`` or ``cc``, ~1 s) and later processes load the cached ``.so``. The cache key hashes the
source, the flags, the compiler's version and the CPU's identity (model and feature flags), because
``-march=native`` code is only valid on the CPU it was built for: a cache directory shared by
machines (a home directory on NFS, a copied container) then holds one library per CPU kind
instead of handing one machine another's instructions.

The cache lives in ``$EMBER_KERNEL_CACHE`` if set, else ``$XDG_CACHE_HOME/ember/kernels``, else
``~/.cache/ember/kernels``. Writes go to a temporary name and are renamed into place, so
concurrent first uses (several engine processes) never load a half-written library.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import platform
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from ember.errors import KernelBuildError

Kernel = TypeVar("Kernel")

PORTABLE_CFLAGS = (
    "-O3",
    "-fPIC",
    "-shared",
    "-std=c11",
    # Lets the compiler reorder float sums, so that dot products vectorise; no finite-math
    # assumption (the kernels compare with -inf-free scores only, but keep IEEE semantics).
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-ffp-contract=fast",
)
# The CPU's own vector units (AVX2, AVX-512): the portable build is the fallback for a compiler
# that does not know -march=native.
CFLAGS = (*PORTABLE_CFLAGS, "-march=native")


def cache_dir() -> Path:
    """Where compiled kernels are kept (see the module docstring)."""
    explicit = os.environ.get("EMBER_KERNEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ember" / "kernels"


def _cpu_identity() -> str:
    """The CPU model and feature flags: what ``-march=native`` compiles for."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine() + platform.processor()
    keep = [line for line in text.splitlines() if line.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(keep))


def _compiler() -> str:
    compiler = os.environ.get("CC") or "cc"
    found = shutil.which(compiler)
    if found is None:
        raise KernelBuildError(f"no C compiler: {compiler!r} is not on PATH")
    return found


def build(source: Path, directory: Path | None = None, extra: tuple[str, ...] = ()) -> Path:
    """The cached shared library built from ``source`` (with ``extra`` flags), compiling it if
    needed: for this CPU, else (the compiler refused) portable."""
    try:
        return build_with(source, (*CFLAGS, *extra), directory)
    except KernelBuildError as native:
        try:
            return build_with(source, (*PORTABLE_CFLAGS, *extra), directory)
        except KernelBuildError as portable:
            raise KernelBuildError(f"{native}; portable build: {portable}") from portable


def build_with(source: Path, flags: tuple[str, ...], directory: Path | None = None) -> Path:
    """The cached shared library built from ``source`` with ``flags``."""
    compiler = _compiler()
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise KernelBuildError(f"{compiler} --version failed: {exc}") from exc
    key = hashlib.sha256()
    for part in (
        source.read_bytes(),
        " ".join(flags).encode(),
        compiler.encode(),
        version.encode(),
    ):
        key.update(part)
        key.update(b"\0")
    key.update(_cpu_identity().encode())
    directory = directory or cache_dir()
    target = directory / f"{source.stem}-{key.hexdigest()[:20]}.so"
    if target.exists():
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(suffix=".so", dir=directory)
        os.close(handle)
    except OSError as exc:
        raise KernelBuildError(f"cannot write the kernel cache {directory}: {exc}") from exc
    try:
        done = subprocess.run(
            [compiler, *flags, "-o", partial, str(source), "-lm"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise KernelBuildError(f"{compiler} failed on {source.name}: {done.stderr.strip()}")
        os.replace(partial, target)
    except (OSError, subprocess.SubprocessError) as exc:
        raise KernelBuildError(f"{compiler} failed on {source.name}: {exc}") from exc
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def load_kernel(
    source: Path, wrap: Callable[[ctypes.CDLL], Kernel], log: logging.Logger, what: str
) -> Kernel | None:
    """``wrap`` of the library built from ``source``, or ``None`` (the caller keeps its torch
    path) when ``EMBER_KERNELS=0`` or it cannot be built or bound; the failure is logged once,
    on ``log``. Memoised per cache directory and compiler: a process builds or loads once."""
    if os.environ.get("EMBER_KERNELS", "1") == "0":
        return None
    return _load_kernel(source, wrap, log, what, str(cache_dir()), os.environ.get("CC", ""))


@functools.lru_cache(maxsize=16)
def _load_kernel(
    source: Path,
    wrap: Callable[[ctypes.CDLL], Kernel],
    log: logging.Logger,
    what: str,
    directory: str,
    compiler: str,
) -> Kernel | None:
    del compiler  # part of the key only: build() reads $CC itself
    try:
        return wrap(ctypes.CDLL(str(build(source, Path(directory)))))
    except (KernelBuildError, OSError, AttributeError) as exc:
        log.warning("%s unavailable, using the torch path: %s", what, exc)
        return None


def load_module(source: Path, name: str, log: logging.Logger, what: str) -> ModuleType | None:
    """``source`` built as the CPython extension module ``name`` (compiled with
    ``-DEMBER_PYTHON_MODULE`` against this interpreter's headers), or ``None`` when
    ``EMBER_KERNELS=0`` or it cannot be built or loaded (no headers: logged once at debug
    level, the caller keeps its ctypes binding). A module function is a vectorcall: ~4 us on
    its first call in an engine step against ~16 for a ctypes call (libffi and the argument
    conversions, cold after a forward). Memoised as ``load_kernel``."""
    if os.environ.get("EMBER_KERNELS", "1") == "0":
        return None
    return _load_module(source, name, log, what, str(cache_dir()), os.environ.get("CC", ""))


@functools.lru_cache(maxsize=16)
def _load_module(
    source: Path, name: str, log: logging.Logger, what: str, directory: str, compiler: str
) -> ModuleType | None:
    del compiler  # part of the key only
    include = sysconfig.get_paths().get("include") or ""
    if not (Path(include) / "Python.h").exists():
        log.debug("%s: no Python.h under %r, using ctypes", what, include)
        return None
    flags = ("-DEMBER_PYTHON_MODULE", f"-I{include}")
    try:
        path = build(source, Path(directory), flags)
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_loader(name, loader)
        if spec is None:
            raise ImportError(f"no module spec for {path}")
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    except (KernelBuildError, ImportError, OSError) as exc:
        log.debug("%s as a module unavailable, using ctypes: %s", what, exc)
        return None
