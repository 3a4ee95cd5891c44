"""An output folder the sweep owns, written one whole generation at a time.

Layout of an output folder (docs/reliability.md has its invariants):
  .infersize-output              the marker: infersize made or adopted this folder
  .infersize.lock                one run at a time (flock, released by the kernel on any death)
  .generations/<run>/            one complete run: tables, manifest, resolved config, cells/
  .generations/<run>.partial/    the run being written: parts/, tmp/ and gen/ (becomes <run>/)
  current -> .generations/<run>  the published generation, switched by one rename
  frontier.parquet -> current/frontier.parquet, ... one link per published name

This module keeps the folder's top level: claiming it, its lock, the links, and what an older
infersize left there; sweep/store/generations.py keeps the runs below `.generations`. Only what
infersize wrote is ever replaced or deleted: a folder holding anything else is refused, and an
older layout's files are recorded (path, size, modification time) when the folder is adopted
and deleted only while they are still exactly what was recorded.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infersize.files import atomic_write
from infersize.sweep.store import walk
from infersize.sweep.store.walk import OutputError as OutputError  # raised here, caught by callers

MARKER = ".infersize-output"
LOCK = ".infersize.lock"
GENERATIONS = ".generations"
CURRENT = "current"
FILE_LIST = ".files.json"  # inside a generation: every file it holds, as written
PARTIAL = ".partial"
OUT = ("out",)  # the setting an OutputError most often asks the user to change
# names an older infersize (before generations) wrote at the top of the folder
LEGACY_NAMES = frozenset(
    {f"{t}.{e}" for t in ("frontier", "best_pairs", "coverage") for e in ("parquet", "csv")}
    | {"manifest.json", "sweep.resolved.yaml", "schema.json", "cells", ".parts", LOCK}
)
# what an older layout kept in its folders: anything else there is a user's
_LEGACY_TREE = re.compile(
    r"(cells/gpu=[^/]+/part-\d{6}\.parquet|\.parts/plan\.json|\.parts/done/\d{6}\.json"
    r"|\.parts/(frontier|best_pairs|coverage)/part-\d{6}\.parquet)"
)
Legacy = dict[str, tuple[int, int]]  # an older layout's file -> (size, modification time)


def _files_of(out_dir: Path, name: str) -> list[str] | None:
    """The files below out_dir/name (a folder, opened without following links), as paths
    relative to out_dir; None when it is a link or not a folder."""
    try:
        with walk.walk(out_dir, name) as folder:
            return [f"{name}/{p}" for p in walk.files_below(folder)]
    except (OSError, OutputError):
        return None


def _legacy_trees_are_ours(out_dir: Path) -> bool:
    for name in ("cells", ".parts"):
        if not (out_dir / name).exists() and not (out_dir / name).is_symlink():
            continue
        files = _files_of(out_dir, name)
        if files is None or not all(_LEGACY_TREE.fullmatch(f) for f in files):
            return False
        if any((out_dir / f).is_symlink() for f in files):
            return False
    return True


def _foreign(out_dir: Path) -> list[str]:
    """What in `out_dir` infersize did not write (empty for a folder it owns)."""
    names = sorted(p.name for p in out_dir.iterdir() if p.name != LOCK)
    if (out_dir / MARKER).is_file() and not (out_dir / MARKER).is_symlink():
        return []
    if not names:
        return []
    manifest = out_dir / "manifest.json"
    legacy = set(names) <= LEGACY_NAMES and manifest.is_file() and not manifest.is_symlink()
    if legacy and _legacy_trees_are_ours(out_dir):
        try:
            if "infersize_version" in json.loads(manifest.read_text(encoding="utf-8")):
                return []
        except (OSError, ValueError):
            pass
    return names


def inside_output(out_dir: Path) -> Path | None:
    """The infersize output folder `out_dir` lies inside (in its .generations, a generation,
    through its `current` link, anywhere below it), or None."""
    for parent in out_dir.resolve().parents:
        marker = parent / MARKER
        if marker.is_file() and not marker.is_symlink():
            return parent
    return None


def claim(out_dir: Path) -> None:
    """Make `out_dir` an infersize output folder: create it, or adopt it when it is empty or
    holds only what infersize wrote; refuse anything else, and any folder inside another
    output folder (whose runs would delete it)."""
    if out_dir.is_symlink() and not out_dir.is_dir():
        raise OutputError(f"{out_dir}: is a dangling symlink; choose another {{out}}", settings=OUT)
    owner = inside_output(out_dir)
    if owner is not None:
        raise OutputError(
            f"{out_dir}: is inside the infersize output folder {owner}, whose runs own "
            "everything in it; choose a folder outside it with {out}",
            settings=OUT,
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(
            f"{out_dir}: exists and is not a folder; choose another {{out}}", settings=OUT
        ) from None
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create it ({exc.strerror})") from None
    if not out_dir.is_dir():
        raise OutputError(
            f"{out_dir}: exists and is not a folder; choose another {{out}}", settings=OUT
        )
    foreign = _foreign(out_dir)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise OutputError(
            f"{out_dir}: holds files infersize did not write ({shown}); choose an empty or new "
            "folder with {out}",
            settings=OUT,
        )
    try:
        if not (out_dir / MARKER).is_file():
            write_marker(out_dir, _record_legacy(out_dir))  # adopted: an older infersize's
        probe = out_dir / f".write-test-{secrets.token_hex(4)}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write there ({exc.strerror})") from None


@contextmanager
def lock(out_dir: Path) -> Iterator[None]:
    """One run per output folder. The lock file is opened without following symlinks (a
    planted link is refused, never truncated) and must be a regular file (a FIFO or device
    there is refused); flock is released by the kernel when the holder dies, even by SIGKILL,
    so a killed run never leaves a stale lock behind."""
    path = out_dir / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(
                f"{path}: is a symlink; infersize will not write through it"
            ) from None
        raise OutputError(f"{path}: cannot open the lock ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutputError(
                f"{path}: the lock is not a regular file (a FIFO, device or socket); remove it"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise OutputError(
                f"{out_dir}: another infersize sweep (pid {holder}) is writing there; wait for "
                "it or choose another {out}",
                settings=OUT,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def identity(path: Path) -> tuple[int, int] | None:
    """(size, modification time) of a regular file (not a link), else None."""
    try:
        info = path.lstat()
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None


def _record_legacy(out_dir: Path) -> Legacy:
    """Every file an older layout left in the folder being adopted, as it is now."""
    record: Legacy = {}
    for name in sorted({p.name for p in out_dir.iterdir()} - {LOCK}):
        files = _files_of(out_dir, name) if (out_dir / name).is_dir() else [name]
        for relative in files or []:
            if (found := identity(out_dir / relative)) is not None:
                record[relative] = found
    return record


def write_marker(out_dir: Path, legacy: Legacy) -> None:
    marker = {"infersize_output": 2, "legacy": {k: list(v) for k, v in sorted(legacy.items())}}
    atomic_write(out_dir / MARKER, json.dumps(marker) + "\n")


def legacy_files(out_dir: Path) -> Legacy:
    """The older layout's files recorded when the folder was adopted, and not yet removed. A
    marker from before files were recorded (a list of names) vouches for none."""
    try:
        recorded = json.loads((out_dir / MARKER).read_text(encoding="utf-8")).get("legacy")
        if isinstance(recorded, dict):
            return {str(k): (int(v[0]), int(v[1])) for k, v in recorded.items()}
    except (OSError, ValueError, AttributeError, TypeError, IndexError):
        pass
    return {}


def legacy_intact(out_dir: Path, name: str, legacy: Legacy) -> bool:
    """out_dir/name is exactly what the older infersize left there: a file of its recorded
    size and time, or a folder holding exactly its recorded files, each unchanged."""
    path = out_dir / name
    if path.is_symlink() or not path.exists():
        return False
    files = _files_of(out_dir, name) if path.is_dir() else [name]
    recorded = {k for k in legacy if k == name or k.startswith(f"{name}/")}
    if files is None or set(files) != recorded:
        return False
    return all(identity(out_dir / f) == legacy[f] for f in files)


def remove_legacy(out_dir: Path, name: str, legacy: Legacy) -> bool:
    """Delete an older layout's file or folder, only the recorded files still unchanged (a
    folder keeps anything else, and stays); True when nothing is left of it."""
    path = out_dir / name
    if not path.is_dir() or path.is_symlink():
        if legacy.get(name) is not None and identity(path) == legacy.get(name):
            path.unlink()
        return not path.exists() and not path.is_symlink()
    with walk.open_root(out_dir) as top:
        return walk.remove_tree(
            top, name, lambda p: identity(out_dir / name / p) == legacy.get(f"{name}/{p}")
        )


def link(out_dir: Path, name: str, target: str) -> None:
    """Point out_dir/name at `target` in one rename, through a link of a random name."""
    tmp = out_dir / f".{name}.link-{secrets.token_hex(4)}"
    tmp.symlink_to(target)
    try:
        tmp.replace(out_dir / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def is_our_link(path: Path) -> bool:
    """A link infersize made: into current/ (a published name) or `current` itself."""
    if not path.is_symlink():
        return False
    target = str(path.readlink())
    return target.startswith(f"{CURRENT}/") or target.startswith(f"{GENERATIONS}/")


def published_names(out_dir: Path) -> set[str]:
    """Top-level links infersize made into current/."""
    return {
        p.name
        for p in out_dir.iterdir()
        if p.is_symlink() and str(p.readlink()).startswith(f"{CURRENT}/")
    }


def check_names_free(out_dir: Path, names: set[str], legacy: Legacy) -> None:
    """Every name to publish is free, one of infersize's links, or an older layout's file still
    as it was recorded; anything else there is the user's, and stays."""
    for name in sorted(names):
        path = out_dir / name
        if not path.exists() and not path.is_symlink():
            continue
        if is_our_link(path) or legacy_intact(out_dir, name, legacy):
            continue
        raise OutputError(
            f"{path}: a file infersize did not write is where it publishes '{name}'; move "
            "it away (the new tables are kept for {resume})",
            settings=("resume",),
        )
