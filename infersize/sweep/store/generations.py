"""The runs below an output folder's `.generations/` (sweep/store/folder.py has the layout): one run
is written into `<run>.partial/` (its parts, its temp files, and gen/: what it publishes),
renamed whole to `<run>/` and made current by switching one link. Every folder here is opened
without following links (sweep/store/walk.py), `.generations` itself included; only a partial folder
named like a run is ever taken for one, and deleting a run deletes only the files a run writes
(by name), so a user's file put anywhere below stays.

A run killed while it publishes is finished by the next run on the folder (`recover`): renamed
but not yet current, it is renamed back, whole and resumable; current but not yet tidied up,
the tidying is done."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from infersize.record import record
from infersize.sweep.store import folder, walk
from infersize.sweep.store.folder import CURRENT, FILE_LIST, GENERATIONS, PARTIAL, Legacy
from infersize.sweep.store.walk import Dir, OutputError

RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}")
# every file a run writes in its partial folder (old versions' temp names included)
RUN_FILES = re.compile(
    r"plan\.json|tmp/[^/]+|parts/[a-z_]+/part-\d{6}\.arrow|parts/done/\d{6}\.json"
    r"|gen/(?:[a-z_]+\.(?:parquet|csv)|manifest\.json|sweep\.resolved\.yaml|schema\.json"
    r"|\.files\.json|cells/gpu=[^/]+/part-\d{6}\.parquet)|(?:[^/]+/)*\.[^/]+\.tmp"
)
RUN_FOLDERS = ("parts", "tmp", "gen")
_ANY, _OLD_TEMP = re.compile(r"[^/]+"), re.compile(r"(?:[^/]+/)*\.[^/]+\.tmp")


@record(kw_only=False)
class Generation:
    """One run's folders: `work` holds its parts and temp files, `gen` what it publishes.
    The paths are for messages; files are reached through `open`."""

    out_dir: Path
    run_id: str

    @property
    def work_name(self) -> str:
        return f"{self.run_id}{PARTIAL}"

    @property
    def work(self) -> Path:
        return self.out_dir / GENERATIONS / self.work_name

    @property
    def parts(self) -> Path:
        return self.work / "parts"

    @property
    def gen(self) -> Path:
        return self.work / "gen"

    @property
    def final(self) -> Path:
        return self.out_dir / GENERATIONS / self.run_id

    def open(self, *names: str, create: bool = False) -> AbstractContextManager[Dir]:
        """The run's folder, or one below it, opened without following links."""
        return walk.walk(self.out_dir, GENERATIONS, self.work_name, *names, create=create)


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


@contextmanager
def store(out_dir: Path, create: bool = False) -> Iterator[Dir]:
    """`.generations`, refused when it is a link."""
    with walk.walk(out_dir, GENERATIONS, create=create) as folder:
        yield folder


def _has_store(out_dir: Path) -> bool:
    path = out_dir / GENERATIONS
    return path.exists() or path.is_symlink()


def partial_runs(out_dir: Path) -> list[Generation]:
    """Unfinished runs in the folder, newest first: folders named like a run."""
    if not _has_store(out_dir):
        return []
    with store(out_dir) as runs:
        names = [n for n in runs.names() if n.endswith(PARTIAL) and runs.kind(n) == "dir"]
    ids = [n[: -len(PARTIAL)] for n in names]
    return [Generation(out_dir, i) for i in sorted(ids, reverse=True) if RUN_ID.fullmatch(i)]


def start(out_dir: Path, run_id: str) -> Generation:
    generation = Generation(out_dir, run_id)
    with store(out_dir, create=True) as runs:
        os.mkdir(generation.work_name, 0o777, dir_fd=runs.fd)  # a fresh run id: never there
        with runs.sub(generation.work_name) as work:
            for name in RUN_FOLDERS:
                os.mkdir(name, 0o777, dir_fd=work.fd)
    return generation


def discard(generation: Generation) -> bool:
    """Remove an unfinished run's files (only what a run writes); True when its folder is
    gone (a user's file kept in it keeps the folder)."""
    with store(generation.out_dir) as runs:
        return walk.remove_tree(runs, generation.work_name, lambda p: bool(RUN_FILES.fullmatch(p)))


def clear_temps(generation: Generation) -> None:
    """A killed run's temp files, before it is resumed (in tmp/, or where older versions put
    them: beside the files in parts/ and gen/)."""
    with generation.open() as work:
        for name in (n for n in RUN_FOLDERS if work.kind(n) == "dir"):
            temp = _ANY if name == "tmp" else _OLD_TEMP
            walk.remove_tree(work, name, temp.fullmatch, keep_folders=True)


def _current_run(out_dir: Path) -> str | None:
    path = out_dir / CURRENT
    if not path.is_symlink():
        return None
    target = str(path.readlink())
    return target[len(GENERATIONS) + 1 :] if target.startswith(f"{GENERATIONS}/") else None


def publish(generation: Generation) -> list[str]:
    """Make the finished run the folder's current generation. Links for its names are made
    first (they point through `current`, so they show nothing new yet); then the run is
    renamed into place and `current` switched in one rename, undone if it fails. After that
    the run is published: tidying up (stale links, an older layout's files, old generations)
    only reports what it could not do. Returns those reports."""
    out_dir = generation.out_dir
    legacy = folder.legacy_files(out_dir)
    with generation.open("gen") as gen:
        names = set(gen.names()) - {FILE_LIST}
        listing = sorted(set(walk.files_below(gen)) - {FILE_LIST})
    folder.check_names_free(out_dir, names, legacy)
    with store(out_dir) as runs, runs.sub(generation.work_name) as work:
        with work.sub("gen") as gen, work.sub("tmp") as tmp:
            walk.write_bytes(gen, FILE_LIST, tmp, json.dumps(listing))
        for name in sorted(names):
            path = out_dir / name
            if (not path.exists() and not path.is_symlink()) or folder.is_our_link(path):
                folder.link(out_dir, name, f"{CURRENT}/{name}")
        walk.move(work, "gen", runs, generation.run_id)
        try:
            folder.link(out_dir, CURRENT, f"{GENERATIONS}/{generation.run_id}")
        except BaseException:
            walk.move(runs, generation.run_id, work, "gen")  # the run stays whole, resumable
            raise
    return tidy(generation, names, legacy)


def tidy(generation: Generation, names: set[str], legacy: Legacy) -> list[str]:
    """After the switch: an older layout's files (where still unchanged), stale links, the
    run's partial folder and older generations. Reports what it left, and why."""
    out_dir = generation.out_dir
    kept: list[str] = []
    try:
        for stale in folder.published_names(out_dir) - names:
            (out_dir / stale).unlink()
        for name in sorted({k.split("/")[0] for k in legacy}):
            if folder.is_our_link(out_dir / name):
                continue  # replaced by an earlier tidy-up
            if not folder.remove_legacy(out_dir, name, legacy):
                kept.append(f"{name}: an older layout's, changed since; left in place")
            elif name in names:
                folder.link(out_dir, name, f"{CURRENT}/{name}")
        left = {k: v for k, v in legacy.items() if folder.identity(out_dir / k) == v}
        if left != legacy:
            folder.write_marker(out_dir, left)
        if not discard(generation):
            kept.append(f"{generation.work_name}: holds files infersize did not write")
        return kept + remove_old_generations(out_dir, keep=generation.run_id)
    except (OSError, OutputError) as exc:
        return [*kept, f"could not tidy the folder ({getattr(exc, 'strerror', None) or exc})"]


def recover(out_dir: Path) -> None:
    """Finish what a publish killed half-way left: a run renamed into place but not current
    is renamed back into its partial folder (whole, and resumable); a run that is current but
    whose partial folder is still there is tidied up as its publish would have."""
    current = _current_run(out_dir)
    for generation in partial_runs(out_dir):
        with store(out_dir) as runs, runs.sub(generation.work_name) as work:
            if work.kind("gen") is not None or runs.kind(generation.run_id) != "dir":
                continue
            if generation.run_id != current:
                walk.move(runs, generation.run_id, work, "gen")
                continue
        with walk.walk(out_dir, GENERATIONS, generation.run_id) as final:
            names = set(final.names()) - {FILE_LIST}
        tidy(generation, names, folder.legacy_files(out_dir))


def remove_old_generations(out_dir: Path, keep: str) -> list[str]:
    """Delete earlier generations file by file from their own lists; anything else found in
    one (a user's file) keeps that generation in place. Returns what was kept, and why."""
    kept = []
    with store(out_dir) as runs:
        for name in runs.names():
            if name == keep or not RUN_ID.fullmatch(name) or runs.kind(name) != "dir":
                continue
            with runs.sub(name) as folder:
                try:
                    files = set(json.loads(walk.read_bytes(folder, FILE_LIST)))
                except (OSError, ValueError, TypeError):
                    kept.append(f"{name}: no file list")
                    continue
                if set(walk.files_below(folder)) - files - {FILE_LIST}:
                    kept.append(f"{name}: holds files infersize did not write")
                    continue
            walk.remove_tree(runs, name, (files | {FILE_LIST}).__contains__)
    return kept
