"""The simulator's numba cache is dropped when any source of its package is newer than it
(numba itself checks only the cached function's own file, so a cached `serve` would keep an old
step formula from step_math.py); nothing else in the folder is touched, a link among the cache
files is removed as a link, and a folder that cannot be changed is left as it is."""

from __future__ import annotations

import os
import time
from pathlib import Path

from infersize.core.serving import kernel_cache
from infersize.core.serving.kernel_cache import numba_files, refresh

HOUR_NS = 3600 * 10**9


def package(tmp_path: Path) -> Path:
    folder = tmp_path / "serving"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "kernel.py").write_text("def serve(): return 1\n")
    (folder / "step_math.py").write_text("def step(): return 2\n")
    return folder


def age(path: Path, hours: float) -> None:
    """Set `path`'s times `hours` before now (a link's own times where it is one)."""
    when = time.time_ns() - int(hours * HOUR_NS)
    os.utime(path, ns=(when, when), follow_symlinks=False)


def compiled(folder: Path, hours_old: float = 0.0) -> list[Path]:
    """What numba writes for two cached functions, beside a bytecode file and another
    package's numba file that must survive."""
    cache = folder / "__pycache__"
    files = [cache / "kernel.serve-77.py311.nbi", cache / "kernel.serve-77.py311.nbc"]
    files += [cache / "step_math.step-1.py311.nbi"]
    for f in [*files, cache / "kernel.cpython-311.pyc", cache / "elsewhere.f-1.py311.nbi"]:
        f.write_bytes(b"x")
        age(f, hours_old)
    return files


def test_a_source_written_after_the_cache_drops_it_and_only_it(tmp_path):
    folder = package(tmp_path)
    for source in folder.glob("*.py"):
        age(source, 2)
    numba = compiled(folder, hours_old=1)  # compiled after the sources were written
    assert sorted(numba_files(folder)) == sorted(numba)
    assert not refresh(folder)
    assert all(f.exists() for f in numba)

    (folder / "step_math.py").write_text("def step(): return 3\n")  # a callee changes, now
    assert refresh(folder)
    assert not any(f.exists() for f in numba)
    assert (folder / "__pycache__" / "kernel.cpython-311.pyc").exists()
    assert (folder / "__pycache__" / "elsewhere.f-1.py311.nbi").exists()
    assert not refresh(folder)  # nothing left to drop


def test_a_link_among_the_cache_files_is_removed_as_a_link(tmp_path):
    folder = package(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = folder / "__pycache__" / "kernel.serve-77.py311.nbc"
    link.symlink_to(victim)
    age(link, 1)
    assert refresh(folder)
    assert not link.is_symlink() and victim.read_text() == "keep me"


def test_a_cache_folder_that_is_not_one_is_left_alone(tmp_path):
    """Whatever stops the refresh (here a file where the cache folder would be; for a user, a
    read-only install) leaves things as they are and lets the simulator run."""
    folder = package(tmp_path)
    (folder / "__pycache__").rmdir()
    (folder / "__pycache__").write_text("not a folder")
    assert not refresh(folder)
    assert (folder / "__pycache__").read_text() == "not a folder"


def test_the_simulators_cache_is_never_older_than_its_sources_once_it_has_loaded():
    """Importing a compiled module refreshes the serving package first, so every numba file
    left there is at least as new as every source (or none is there yet)."""
    from infersize.core.serving import kernel  # noqa: F401  (loads numba, refreshes once)

    compiled = numba_files(kernel_cache.PACKAGE)
    assert not refresh(kernel_cache.PACKAGE)
    assert all(f.exists() for f in compiled)
