"""Asset files: one path looked up in a directory, safely, and a directory's manifest.

``ember dev`` serves the directory as it is now (an edited file is served at once: each lookup
stats the file, and its ETag is recomputed when its mtime, size or inode changed); a deploy
takes the manifest (every path with its hash and size) and the files. A lookup never leaves the
directory: a ``.`` or ``..`` segment, a NUL or a backslash finds nothing, and a path whose real
location (symlinks followed) is outside the directory finds nothing either. Files the
``.assetsignore`` leaves out, and files past the platform's size limit, are not assets.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ember.bindings.assets.ignore import ALWAYS_IGNORED, IGNORE_FILE, AssetsIgnore
from ember.errors import ConfigError

MAX_ASSET_SIZE = 25 * 1024 * 1024  # workers-shared MAX_ASSET_SIZE
MAX_ASSET_COUNT = 100_000  # workers-shared MAX_ASSET_COUNT (the paid plan's ceiling)
PAGES_WORKER = "_worker.js"  # a Pages project's server code: wrangler refuses it as an asset
# The built-in table only: the machine's /etc/mime.types must not change what a file is served as.
_TYPES = mimetypes.MimeTypes()
# Where the mime package wrangler uses (mime 4) names a type Python's table lacks or names older.
_EXTRA_TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".wasm": "application/wasm",
    ".webmanifest": "application/manifest+json",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".avif": "image/avif",
    ".md": "text/markdown",
}


@dataclass(frozen=True, slots=True)
class Asset:
    """One servable file: its ETag (a content hash), size, type and where its bytes are."""

    path: str  # as looked up: /blog/index.html
    etag: str
    size: int
    content_type: str
    file: Path


def content_type(name: str) -> str:
    """The Content-Type a file is served with, by its extension; ``text/*`` in UTF-8 (as the
    platform: ``text/html; charset=utf-8``); unknown: ``application/octet-stream``."""
    suffix = os.path.splitext(name)[1].lower()
    found = _EXTRA_TYPES.get(suffix) or _TYPES.guess_type("x" + suffix, strict=False)[0]
    if found is None:
        return "application/octet-stream"
    if found.startswith("text/") and "charset" not in found:
        return f"{found}; charset=utf-8"
    return found


def file_hash(file: Path) -> str:
    """32 hex digits of the file's SHA-256: its ETag, and its name in a deployed version."""
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def safe_relative(path: str) -> str | None:
    """``/a/b.txt`` -> ``a/b.txt``; None for a path that could leave the directory."""
    if not path.startswith("/") or "\x00" in path or "\\" in path:
        return None
    parts = path[1:].split("/")
    if any(part in (".", "..") for part in parts):
        return None
    return "/".join(parts)


class AssetDirectory:
    """The files of an assets directory, read live."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self._hashes: dict[Path, tuple[tuple[int, int, int], str]] = {}
        self._ignore: tuple[tuple[int, int, int] | None, AssetsIgnore] | None = None

    def lookup(self, path: str) -> Asset | None:
        """The asset at decoded ``path`` (``/index.html``), if it is one now."""
        relative = safe_relative(path)
        if not relative or relative.endswith("/"):
            return None
        candidate = self.directory / relative
        try:
            real = candidate.resolve(strict=True)
            info = real.stat()
        except (OSError, RuntimeError):
            return None
        if not real.is_relative_to(self.directory) or not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_ASSET_SIZE or self._ignored(relative):
            return None
        key = (info.st_mtime_ns, info.st_size, info.st_ino)
        cached = self._hashes.get(real)
        if cached is None or cached[0] != key:
            try:
                cached = (key, file_hash(real))
            except OSError:
                return None
            self._hashes[real] = cached
        return Asset(path, cached[1], info.st_size, content_type(relative), real)

    def _ignored(self, relative: str) -> bool:
        """``.assetsignore`` as it is now (re-read when it changes)."""
        try:
            info = (self.directory / IGNORE_FILE).stat()
            key: tuple[int, int, int] | None = (info.st_mtime_ns, info.st_size, info.st_ino)
        except OSError:
            key = None
        if self._ignore is None or self._ignore[0] != key:
            self._ignore = (key, AssetsIgnore.of(self.directory))
        return self._ignore[1].ignored(relative)


class ManifestAssets:
    """A deployed version's assets: its manifest (path -> hash and size) over the directory its
    files were written to. Only a path in the manifest is an asset, and its ETag is the hash
    uploaded with it: nothing is read or hashed to answer a lookup."""

    def __init__(self, manifest: dict[str, dict[str, object]], directory: Path) -> None:
        self._manifest = manifest
        self.directory = directory

    def lookup(self, path: str) -> Asset | None:
        # Never served, even when a client other than wrangler (which leaves them out) named
        # them in its manifest: they configure the assets, they are not assets.
        entry = self._manifest.get(path) if path not in ALWAYS_IGNORED else None
        relative = safe_relative(path) if entry is not None else None
        if entry is None or not relative:
            return None
        size = entry.get("size")
        return Asset(
            path,
            str(entry.get("hash")),
            size if isinstance(size, int) else 0,
            content_type(relative),
            self.directory / relative,
        )


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One file of a manifest: its path (``/a/b.txt``), hash and size."""

    path: str
    hash: str
    size: int
    file: Path


def build_manifest(
    directory: Path, fname: str = "", key: str = "assets.directory"
) -> list[ManifestEntry]:
    """Every asset under ``directory`` (sorted by path) with its hash, or a ConfigError naming
    the file past the platform's limits (25 MiB a file, 100,000 files), as wrangler refuses."""
    return [
        ManifestEntry("/" + relative, file_hash(real), size, real)
        for relative, real, size in _walk(directory, fname, key)
    ]


def check_limits(directory: Path, fname: str = "", key: str = "assets.directory") -> int:
    """``build_manifest``'s checks without reading the files (``ember dev`` at start and on
    each reload); the number of assets."""
    return sum(1 for _ in _walk(directory, fname, key))


def exposed(directory: Path, files: list[Path]) -> list[str]:
    """Those of ``files`` (the project's config file, its main module) that ``directory``
    would publish as assets, relative to it."""
    directory = directory.resolve()
    ignore = AssetsIgnore.of(directory)
    out = []
    for file in files:
        real = file.resolve()
        if real.is_relative_to(directory):
            relative = real.relative_to(directory).as_posix()
            if not ignore.ignored(relative):
                out.append(relative)
    return out


def _walk(directory: Path, fname: str, key: str) -> Iterator[tuple[str, Path, int]]:
    directory = directory.resolve()
    ignore = AssetsIgnore.of(directory)
    worker_js = directory / PAGES_WORKER
    if worker_js.exists() and not (
        ignore.ignored_dir(PAGES_WORKER) if worker_js.is_dir() else ignore.ignored(PAGES_WORKER)
    ):
        # As wrangler refuses it: a Pages project's server code, published as a file.
        kind = "directory" if worker_js.is_dir() else "file"
        raise ConfigError(
            fname,
            key,
            f"{PAGES_WORKER} ({kind})",
            f"no Pages {PAGES_WORKER} {kind} among the assets: it would expose your private "
            "server-side code to the public Internet",
            hint=f"remove it, or add {PAGES_WORKER!r} to a file named .assetsignore in the root "
            "of the assets directory",
        )
    count = 0
    for current, dirs, files in os.walk(directory):
        base = Path(current)
        dirs[:] = sorted(  # not even walked: node_modules can be large
            d for d in dirs if not ignore.ignored_dir((base / d).relative_to(directory).as_posix())
        )
        for name in sorted(files):
            file = base / name
            relative = file.relative_to(directory).as_posix()
            if ignore.ignored(relative):
                continue
            try:
                real = file.resolve(strict=True)
                size = real.stat().st_size
            except OSError:
                continue
            if not real.is_relative_to(directory) or not real.is_file():
                continue
            if size > MAX_ASSET_SIZE:
                raise ConfigError(
                    fname,
                    key,
                    f"{relative}: {size} bytes",
                    f"asset files of at most {MAX_ASSET_SIZE} bytes (25 MiB)",
                    hint="leave it out with .assetsignore in the assets directory",
                )
            count += 1
            if count > MAX_ASSET_COUNT:
                raise ConfigError(
                    fname, key, f"more than {MAX_ASSET_COUNT} files", f"at most {MAX_ASSET_COUNT}"
                )
            yield relative, real, size
