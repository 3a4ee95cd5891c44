"""The parsed catalogs, kept between runs: `infersize spec` would otherwise spend more time
parsing and validating YAML than computing. The key is a SHA-256 of the catalog files' bytes and
of the modules that define the records, so any edit to either misses.

An entry is data that cannot run code: a header line, then JSON in which a record is an object
naming its class and giving its fields' values in their order (as fast to read as a pickle),
rebuilt only as one of the record classes the caller lists, with exactly that class's fields.
An entry is read only from a real folder of this user that nobody else can write to, and only
when it is itself a regular file of this user that nobody else can write to (both checked on
what was opened, not on the name); entries are written 0600 whatever the umask.
Pruning removes only files the cache wrote: its own name pattern and its own header. Anything
else in the folder, or an entry that fails a check, is left alone and parsed again.

Where: $INFERSIZE_CACHE_DIR, else $XDG_CACHE_HOME/infersize, else ~/.cache/infersize. Set
INFERSIZE_NO_CACHE=1 to neither read nor write it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from infersize import __version__
from infersize.files import atomic_write

MAX_CACHE_BYTES = 16 * 1024 * 1024
HEADER = b"infersize catalog cache: JSON, format 1\n"
RECORD, VALUES = "__record__", "values"  # a record: its class's name, its fields' values
ENTRY_NAME = re.compile(r"catalog-[0-9a-f]{64}\.json")
KEEP = 8  # catalogs kept: the built-in one and a few overlays, across edits
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)


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


def _mine(info: os.stat_result) -> bool:
    """Owned by this user, and nobody else may write to it."""
    owner_ok = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return owner_ok and not info.st_mode & 0o022


def _trusted(folder: Path) -> bool:
    """Only a real folder (not a link) of this user that nobody else can write to."""
    try:
        info = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and _mine(info)


def _open_own_file(path: Path) -> tuple[int, os.stat_result] | None:
    """An open descriptor of `path` and its status when it is a regular file of this user that
    nobody else can write to (checked on the opened file, never through a link); None for
    anything else (a folder, a link, a device, another user's file), left as it is."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or not _mine(info):
        os.close(fd)
        return None
    return fd, info


def _read_entry(path: Path) -> bytes | None:
    """The bytes of `path` when it is this user's own regular file (`_open_own_file`), not
    over MAX_CACHE_BYTES."""
    opened = _open_own_file(path)
    if opened is None:
        return None
    fd, info = opened
    with os.fdopen(fd, "rb") as handle:
        return None if info.st_size > MAX_CACHE_BYTES else handle.read(MAX_CACHE_BYTES + 1)


def _plain(value: Any) -> Any:
    """`value` as JSON data: a record becomes an object naming its class."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        values = [_plain(getattr(value, f.name)) for f in dataclasses.fields(value)]
        return {RECORD: type(value).__name__, VALUES: values}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _rebuild(records: Mapping[str, type]) -> Any:
    """json's object hook: an object naming a listed record class, with a value for each of
    that class's fields, becomes that record (its values were checked when the catalog files
    were read); anything else is an error, and the entry is parsed again."""
    fields = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in records.items()}

    def hook(obj: dict[str, Any]) -> Any:
        kind = obj.get(RECORD)
        if kind is None:
            return obj
        values = obj.get(VALUES) or ()
        if kind not in records or len(obj) != 2 or len(values) != len(fields[kind]):
            raise ValueError(f"not a record of this version: {kind}")
        record: Any = object.__new__(records[kind])
        record.__dict__.update(zip(fields[kind], values, strict=True))  # frozen: in __dict__
        return record

    return hook


def load_cached(key: str, records: Mapping[str, type]) -> Any | None:
    """What `store_cached` kept under `key`, its records rebuilt as `records` lists them (by
    class name); None when absent, damaged or not to be trusted."""
    folder = cache_dir()
    if folder is None or not _trusted(folder):
        return None
    data = _read_entry(folder / f"catalog-{key}.json")
    if data is None or not data.startswith(HEADER) or len(data) > MAX_CACHE_BYTES:
        return None
    try:
        return json.loads(data[len(HEADER) :], object_hook=_rebuild(records))
    except (ValueError, TypeError, RecursionError):
        return None  # damaged: parse again


def store_cached(key: str, value: Any) -> None:
    """Written atomically, 0600; a cache that cannot be written is no error."""
    folder = cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _trusted(folder):
            payload = HEADER + json.dumps(_plain(value), separators=(",", ":")).encode()
            atomic_write(folder / f"catalog-{key}.json", payload, mode=0o600)
            _prune(folder)
    except (OSError, TypeError, ValueError):
        pass


def _written_here(folder: Path, name: str) -> int | None:
    """The modification time of an entry the cache wrote (its name pattern, its header, this
    user's regular file), else None."""
    if not ENTRY_NAME.fullmatch(name):
        return None
    opened = _open_own_file(folder / name)
    if opened is None:
        return None
    fd, info = opened
    with os.fdopen(fd, "rb") as handle:
        return info.st_mtime_ns if handle.read(len(HEADER)) == HEADER else None


def _prune(folder: Path) -> None:
    """Only the most recently written catalogs stay (each edit of a catalog makes a new one);
    nothing the cache did not write is touched."""
    written = {p.name: _written_here(folder, p.name) for p in folder.iterdir()}
    entries = sorted((t, n) for n, t in written.items() if t is not None)
    for _, name in entries[: max(0, len(entries) - KEEP)]:
        (folder / name).unlink(missing_ok=True)
