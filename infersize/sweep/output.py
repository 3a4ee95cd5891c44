"""An output folder the sweep owns, written one whole generation at a time.

Layout of an output folder (docs/architecture.md):
  .infersize-output              the marker: infersize made or adopted this folder
  .infersize.lock                one run at a time (flock, released by the kernel on any death)
  .generations/<run>/            one complete run: tables, manifest, resolved config, cells/
  .generations/<run>.partial/    the run being written: parts/ and gen/ (what becomes <run>/)
  current -> .generations/<run>  the published generation, switched by one rename
  frontier.parquet -> current/frontier.parquet, ... one link per published name

A run writes everything into its partial folder, renames gen/ to .generations/<run>, and then
replaces the `current` link in one rename: a reader sees the old generation or the new one,
never a mix, and a failure at any point leaves the old one whole. Only what infersize wrote is
ever replaced or deleted: each generation lists its files, and a folder with anything else in
it is refused (or, for an old generation, left in place).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from infersize.errors import InfersizeError
from infersize.files import atomic_write

MARKER = ".infersize-output"
LOCK = ".infersize.lock"
GENERATIONS = ".generations"
CURRENT = "current"
FILE_LIST = ".files.json"  # inside a generation: every file it holds, as written
PARTIAL = ".partial"
# names an older infersize (before generations) wrote at the top of the folder
LEGACY_NAMES = frozenset(
    {f"{t}.{e}" for t in ("frontier", "best_pairs", "coverage") for e in ("parquet", "csv")}
    | {"manifest.json", "sweep.resolved.yaml", "schema.json", "cells", ".parts", LOCK}
)


class OutputError(InfersizeError):
    """The output folder cannot be used (unwritable, not ours, held by another run)."""


OUT = ("out",)  # the setting an OutputError most often asks the user to change


# what an older layout kept in its folders: anything else there is a user's
_LEGACY_TREE = re.compile(
    r"(cells/gpu=[^/]+/part-\d{6}\.parquet|\.parts/plan\.json|\.parts/done/\d{6}\.json"
    r"|\.parts/(frontier|best_pairs|coverage)/part-\d{6}\.parquet)"
)


def _legacy_trees_are_ours(out_dir: Path) -> bool:
    for tree in ("cells", ".parts"):
        root = out_dir / tree
        if root.is_symlink():
            return False
        for path in root.rglob("*") if root.is_dir() else ():
            relative = str(path.relative_to(out_dir))
            if path.is_symlink() or (path.is_file() and not _LEGACY_TREE.fullmatch(relative)):
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


def claim(out_dir: Path) -> None:
    """Make `out_dir` an infersize output folder: create it, or adopt it when it is empty or
    holds only what infersize wrote; refuse anything else."""
    if out_dir.is_symlink() and not out_dir.is_dir():
        raise OutputError(f"{out_dir}: is a dangling symlink; choose another {{out}}", settings=OUT)
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
            legacy = sorted(
                {p.name for p in out_dir.iterdir()} - {LOCK}
            )  # adopted: an older infersize's
            marker = {"infersize_output": 1, "legacy": legacy}
            atomic_write(out_dir / MARKER, json.dumps(marker) + "\n")
        probe = out_dir / f".write-test-{secrets.token_hex(4)}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write there ({exc.strerror})") from None


@contextmanager
def lock(out_dir: Path) -> Iterator[None]:
    """One run per output folder. The lock file is opened without following symlinks (a
    planted link is refused, never truncated); flock is released by the kernel when the holder
    dies, even by SIGKILL, so a killed run never leaves a stale lock behind."""
    path = out_dir / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(
                f"{path}: is a symlink; infersize will not write through it"
            ) from None
        raise OutputError(f"{path}: cannot open the lock ({exc.strerror})") from None
    try:
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


@dataclass(frozen=True)
class Generation:
    """One run's folders: `work` holds its parts and `gen` what will be published."""

    out_dir: Path
    run_id: str

    @property
    def work(self) -> Path:
        return self.out_dir / GENERATIONS / f"{self.run_id}{PARTIAL}"

    @property
    def parts(self) -> Path:
        return self.work / "parts"

    @property
    def gen(self) -> Path:
        return self.work / "gen"

    @property
    def final(self) -> Path:
        return self.out_dir / GENERATIONS / self.run_id


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def partial_runs(out_dir: Path) -> list[Generation]:
    """Unfinished runs in the folder, newest first."""
    store = out_dir / GENERATIONS
    if not store.is_dir():
        return []
    runs = [
        Generation(out_dir, p.name[: -len(PARTIAL)])
        for p in store.iterdir()
        if p.name.endswith(PARTIAL) and p.is_dir() and not p.is_symlink()
    ]
    return sorted(runs, key=lambda g: g.run_id, reverse=True)


def start(out_dir: Path, run_id: str) -> Generation:
    generation = Generation(out_dir, run_id)
    (out_dir / GENERATIONS).mkdir(exist_ok=True)
    generation.work.mkdir()  # a fresh run id: never an existing folder
    generation.parts.mkdir()
    generation.gen.mkdir()
    return generation


def discard(generation: Generation) -> None:
    """Remove an unfinished run's folder (its parts are only ever infersize's)."""
    shutil.rmtree(generation.work, ignore_errors=True)


def _list_files(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink()
    )


def _link(out_dir: Path, name: str, target: str) -> None:
    """Point out_dir/name at `target` in one rename, through a link of a random name."""
    tmp = out_dir / f".{name}.link-{secrets.token_hex(4)}"
    tmp.symlink_to(target)
    try:
        tmp.replace(out_dir / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _published_names(out_dir: Path) -> set[str]:
    """Top-level links infersize made into current/."""
    names = set()
    for entry in out_dir.iterdir():
        if entry.is_symlink() and str(entry.readlink()).startswith(f"{CURRENT}/"):
            names.add(entry.name)
    return names


def _legacy(out_dir: Path) -> set[str]:
    """The top-level names an older infersize wrote, recorded when the folder was adopted."""
    try:
        return set(json.loads((out_dir / MARKER).read_text(encoding="utf-8")).get("legacy", []))
    except (OSError, ValueError, AttributeError):
        return set()


def _check_names_free(out_dir: Path, names: set[str], legacy: set[str]) -> None:
    """Every name to publish is free, one of infersize's links, or an older layout's file."""
    for name in sorted(names):
        path = out_dir / name
        if path.exists() and not path.is_symlink() and name not in legacy:
            raise OutputError(
                f"{path}: a file infersize did not write is where it publishes '{name}'; move "
                "it away (the new tables are kept for {resume})",
                settings=("resume",),
            )


def publish(generation: Generation) -> list[str]:
    """Make the finished run the folder's current generation. Links for its names are made
    first (they point through `current`, so they show nothing new yet); then the run is
    renamed into place and `current` switched in one rename, undone if it fails. After that
    the run is published: tidying up (stale links, an older layout's files, old generations)
    only reports what it could not do. Returns those reports."""
    out_dir = generation.out_dir
    names = {p.name for p in generation.gen.iterdir()}
    legacy = _legacy(out_dir)
    _check_names_free(out_dir, names, legacy)
    atomic_write(generation.gen / FILE_LIST, json.dumps(_list_files(generation.gen)))
    for name in sorted(names):
        if not (out_dir / name).exists() or (out_dir / name).is_symlink():
            _link(out_dir, name, f"{CURRENT}/{name}")
    generation.gen.rename(generation.final)
    try:
        _link(out_dir, CURRENT, f"{GENERATIONS}/{generation.run_id}")
    except BaseException:
        generation.final.rename(generation.gen)  # the run stays whole, and resumable
        raise
    try:
        return _tidy(generation, names, legacy)
    except OSError as exc:
        return [f"could not tidy the folder ({exc.strerror or exc})"]


def _tidy(generation: Generation, names: set[str], legacy: set[str]) -> list[str]:
    """After the switch: links for an older layout's names, stale links, leftovers."""
    out_dir = generation.out_dir
    for name in sorted(names & legacy):
        path = out_dir / name
        if path.is_dir() and not path.is_symlink():  # an older layout's cells/
            shutil.rmtree(path)
        if not path.is_symlink():
            _link(out_dir, name, f"{CURRENT}/{name}")
    for stale in _published_names(out_dir) - names:
        (out_dir / stale).unlink()
    for name in legacy - names - {LOCK}:  # an older layout's leftovers
        path = out_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_file() and not path.is_symlink():
            path.unlink()
    discard(generation)
    return remove_old_generations(out_dir, keep=generation.run_id)


def remove_old_generations(out_dir: Path, keep: str) -> list[str]:
    """Delete earlier generations file by file from their own lists; anything else found in
    one (a user's file) keeps that generation in place. Returns what was kept, and why."""
    kept = []
    for folder in (out_dir / GENERATIONS).iterdir():
        if folder.name == keep or folder.name.endswith(PARTIAL) or folder.is_symlink():
            continue
        listed = folder / FILE_LIST
        try:
            files = set(json.loads(listed.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            kept.append(f"{folder.name}: no file list")
            continue
        if set(_list_files(folder)) - files - {FILE_LIST}:
            kept.append(f"{folder.name}: holds files infersize did not write")
            continue
        shutil.rmtree(folder)
    return kept
