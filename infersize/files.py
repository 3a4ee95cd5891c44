"""Files in and out. Writing so that a reader never sees half of one: a temporary file created
exclusively beside the destination (a random name, never through a symlink), then renamed over
it. Reading inputs only from regular files of a bounded size."""

from __future__ import annotations

import codecs
import errno
import os
import stat
import tempfile
from pathlib import Path


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _umask()  # read once, at import (reading it means setting it)


def temp_beside(path: Path, mode: int | None = None) -> tuple[int, str]:
    """A new temporary file beside `path`: a random name, created exclusively (never through
    a symlink), with `mode`, else the permissions a plain write would give it (mkstemp's are
    0600)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_UMASK if mode is None else mode)
    return fd, tmp


def atomic_write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Replace `path` with `data` in one rename (the file gets `mode`, else what a plain write
    would give it); on failure the old file stays and no temp file is left behind."""
    payload = data.encode() if isinstance(data, str) else data
    if path.exists() and not path.is_symlink() and not path.is_file():
        raise OSError(errno.EEXIST, "exists and is not a regular file", str(path))
    fd, tmp = temp_beside(path, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


MAX_TEXT_INPUT_BYTES = 64 * 2**20  # a YAML sweep, a catalog overlay, a config.json


class InputFileError(ValueError):
    """An input path that is not a readable regular file of a sane size (the message says
    which); callers turn it into their own one-line error."""


def open_regular(path: Path) -> int:
    """A read-only descriptor for `path`, refused unless it is a regular file: FIFOs, devices
    and sockets would block or never end. O_NONBLOCK keeps opening a FIFO from hanging."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, expected a file") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        if Path(path).is_dir():
            raise InputFileError(f"{path}: is a directory, expected a file")
        raise InputFileError(f"{path}: is not a regular file (a device, FIFO or socket)")
    os.set_blocking(fd, True)
    return fd


def read_input(path: Path, limit: int = MAX_TEXT_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise InputFileError(f"{path}: {size:,} bytes, over the {limit:,}-byte limit for it")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputFileError(f"{path}: over the {limit:,}-byte limit for it")
    return data


# byte-order marks and the codec each names, longest first (UTF-32's LE mark starts UTF-16's)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_text(data: bytes) -> str:
    """A text file's bytes as text, by its byte-order mark: UTF-8 (with or without one),
    UTF-16 or UTF-32 (Windows PowerShell's `>` writes UTF-16 LE with a mark). Undecodable
    bytes become U+FFFD, so a damaged line cannot hide the others."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    return data.decode("utf-8", errors="replace")
