"""The parsed catalogs, kept between runs: `infersize spec` would otherwise spend more time
parsing and validating YAML than computing. The key is a SHA-256 of the catalog files' bytes and
of the modules that define the records, so any edit to either misses; a cache that cannot be
read, or a folder others can write to, is ignored (it is parsed again).

Where: $INFERSIZE_CACHE_DIR, else $XDG_CACHE_HOME/infersize, else ~/.cache/infersize. Set
INFERSIZE_NO_CACHE=1 to neither read nor write it."""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infersize import __version__
from infersize.files import InputFileError, atomic_write, read_input

MAX_CACHE_BYTES = 16 * 1024 * 1024


def cache_dir() -> Path | None:
    if os.environ.get("INFERSIZE_NO_CACHE"):
        return None
    chosen = os.environ.get("INFERSIZE_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "infersize"


def cache_key(blobs: Sequence[tuple[str, bytes]], code: Sequence[Path]) -> str:
    """SHA-256 of the version, each (name, bytes) read and the defining modules' source."""
    digest = hashlib.sha256(__version__.encode())
    for name, blob in [*blobs, *((str(p.name), p.read_bytes()) for p in code)]:
        digest.update(f"\0{name}\0{len(blob)}\0".encode())
        digest.update(blob)
    return digest.hexdigest()


def _trusted(folder: Path) -> bool:
    """Only a real folder of this user that nobody else can write to."""
    try:
        info = folder.lstat()
    except OSError:
        return False
    owner_ok = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISDIR(info.st_mode) and owner_ok and not info.st_mode & 0o022


def load_cached(key: str) -> Any | None:
    folder = cache_dir()
    if folder is None or not _trusted(folder):
        return None
    try:
        return pickle.loads(read_input(folder / f"catalog-{key}.pickle", MAX_CACHE_BYTES))
    except (InputFileError, OSError, pickle.UnpicklingError, EOFError, AttributeError,
            ImportError, TypeError, ValueError, IndexError):  # fmt: skip
        return None  # absent or damaged: parse again


def store_cached(key: str, value: Any) -> None:
    """Written atomically; a cache that cannot be written is no error."""
    folder = cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _trusted(folder):
            atomic_write(folder / f"catalog-{key}.pickle", pickle.dumps(value))
            _prune(folder)
    except OSError:
        pass


KEEP = 8  # catalogs kept: the built-in one and a few overlays, across edits


def _prune(folder: Path) -> None:
    """Only the most recently written catalogs stay (each edit of a catalog makes a new one)."""
    entries = sorted(
        (p for p in folder.glob("catalog-*.pickle") if p.is_file() and not p.is_symlink()),
        key=lambda p: p.stat().st_mtime_ns,
        reverse=True,
    )
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)
