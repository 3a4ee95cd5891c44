"""The folders below an output folder's `.generations/`, walked one name at a time from open
folder descriptors and never through a symlink: each folder is opened with O_NOFOLLOW relative
to its parent's descriptor (os.open, os.rename and os.unlink with dir_fd, as openat does), so a
link planted anywhere below `.generations` is refused, never followed, and nothing written,
renamed or deleted there can land outside it. Only the output folder itself, which the user
chose, is opened by its path.

Files are written whole under a fresh exclusive temp name in a run's own `tmp/` folder and then
renamed into place, so no temp file is ever inside a folder that is published."""

from __future__ import annotations

import errno
import io
import mmap
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from infersize.errors import InfersizeError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 16  # a run's folders are three deep; deeper trees are left as they are


class OutputError(InfersizeError):
    """The output folder cannot be used (unwritable, not ours, held by another run)."""


def refused_link(path: Path) -> OutputError:
    return OutputError(f"{path}: is a symlink or not a folder; infersize will not write through it")


@dataclass
class Dir:
    """An open folder: its descriptor, and its path for messages."""

    fd: int
    path: Path

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def sub(self, name: str, create: bool = False) -> Dir:
        """The folder `name` in this one, opened without following a link (made if asked)."""
        return Dir(_open(name, self.fd, create, self.path / name), self.path / name)

    def kind(self, name: str) -> str | None:
        """'dir', 'file', 'link' or 'other' for `name` here, without following it; None when
        there is none."""
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        for kind, test in (("dir", stat.S_ISDIR), ("file", stat.S_ISREG), ("link", stat.S_ISLNK)):
            if test(mode):
                return kind
        return "other"

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))  # noqa: PTH208 - a descriptor, not a path


def _open(name: str, parent: int, create: bool, shown: Path) -> int:
    try:
        return os.open(name, _DIR | _NOFOLLOW, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise refused_link(shown) from None
        raise
    with suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)
    return _open(name, parent, False, shown)


def open_root(path: Path) -> Dir:
    """The output folder itself, by the path the user gave (links above it are theirs)."""
    return Dir(os.open(path, _DIR), path)


@contextmanager
def walk(root: Path, *names: str, create: bool = False) -> Iterator[Dir]:
    """root/names[0]/names[1]/..., each opened without following a link."""
    here = open_root(root)
    try:
        for name in names:
            below = here.sub(name, create)
            here.close()
            here = below
        yield here
    finally:
        here.close()


def new_temp(tmp: Dir, name: str) -> tuple[int, str]:
    """A fresh temp file for `name` in `tmp`: a random name, created exclusively, never
    through a link, with the permissions a plain write would give it."""
    while True:
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(temp, _NEW_FILE, 0o666, dir_fd=tmp.fd), temp
        except FileExistsError:
            continue


def move(src: Dir, src_name: str, dst: Dir, dst_name: str) -> None:
    """Rename src/src_name over dst/dst_name (both in one file system): one atomic step."""
    os.replace(src_name, dst_name, src_dir_fd=src.fd, dst_dir_fd=dst.fd)


def write_file(
    dest: Dir,
    name: str,
    tmp: Dir,
    write: Callable[[BinaryIO], object],
    before_move: Callable[[], None] | None = None,
) -> None:
    """dest/name written whole: `write` fills a temp file in `tmp`, which is then renamed into
    place (after `before_move`, which may still refuse); on any failure the temp file is
    removed and dest/name is as it was."""
    fd, temp = new_temp(tmp, name)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        if before_move is not None:
            before_move()
        move(tmp, temp, dest, name)
    except BaseException:
        unlink(tmp, temp)
        raise


def write_bytes(dest: Dir, name: str, tmp: Dir, data: bytes | str) -> None:
    payload = data.encode() if isinstance(data, str) else data
    write_file(dest, name, tmp, lambda handle: handle.write(payload))


def unlink(folder: Dir, name: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder.fd)


def read_bytes(folder: Dir, name: str, limit: int = 64 * 2**20) -> bytes:
    """A regular file here, opened without following a link: its first `limit` bytes (-1: all
    of them)."""
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | os.O_CLOEXEC, dir_fd=folder.fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(folder.path / name))
        return handle.read(limit)


class WriteThrough(io.RawIOBase):
    """A file that hands what a writer writes on to `handle` (pass_on) and counts it: what
    pyarrow's writers ask of a file object they are given (write, tell)."""

    def __init__(self, handle: BinaryIO) -> None:
        super().__init__()
        self.handle = handle
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.pass_on(view)
        self.position += view.nbytes
        return view.nbytes

    def pass_on(self, view: memoryview) -> None:
        self.handle.write(view)

    def tell(self) -> int:
        return self.position


def map_file(folder: Dir, name: str) -> mmap.mmap:
    """A regular file here mapped into memory (read only), opened without following a link."""
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | os.O_CLOEXEC, dir_fd=folder.fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(folder.path / name))
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def files_below(folder: Dir, prefix: str = "", depth: int = 0) -> Iterator[str]:
    """Every file and link below `folder` (relative paths), links not followed."""
    for name in folder.names():
        kind = folder.kind(name)
        if kind == "dir" and depth < MAX_DEPTH:
            with folder.sub(name) as below:
                yield from files_below(below, f"{prefix}{name}/", depth + 1)
        elif kind != "dir":
            yield prefix + name


def remove_tree(
    parent: Dir, name: str, ours: Callable[[str], object], keep_folders: bool = False
) -> bool:
    """Delete, below parent/name, the files and links `ours(relative path)` names, then every
    folder left empty, parent/name included (unless `keep_folders`); never follow a link.
    True when nothing is left."""
    try:
        folder = parent.sub(name)
    except FileNotFoundError:
        return True
    with folder:
        empty = _remove_in(folder, "", ours, 0, keep_folders)
    if empty and not keep_folders:
        os.rmdir(name, dir_fd=parent.fd)
    return empty


def _remove_in(
    folder: Dir, prefix: str, ours: Callable[[str], object], depth: int, keep_folders: bool
) -> bool:
    empty = True
    for name in folder.names():
        relative = prefix + name
        if folder.kind(name) == "dir":
            if depth >= MAX_DEPTH:
                empty = False
                continue
            with folder.sub(name) as below:
                gone = _remove_in(below, relative + "/", ours, depth + 1, keep_folders)
            if gone and not keep_folders:
                os.rmdir(name, dir_fd=folder.fd)
            empty = empty and gone
        elif ours(relative):
            unlink(folder, name)
        else:
            empty = False
    return empty
