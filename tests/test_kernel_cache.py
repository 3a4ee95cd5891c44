"""The simulator's numba cache is dropped when any source of its package changes (numba itself
checks only the cached function's own file, so a cached `serve` would keep an old step formula
from step_math.py); nothing else in the folder is touched, a planted link is not written
through, and a folder that cannot be written is left as it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infersize.core.serving import kernel_cache
from infersize.core.serving.kernel_cache import STAMP, refresh, sources_digest


def package(tmp_path: Path) -> Path:
    folder = tmp_path / "serving"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "kernel.py").write_text("def serve(): return 1\n")
    (folder / "step_math.py").write_text("def step(): return 2\n")
    return folder


def compiled(folder: Path) -> list[Path]:
    """What numba writes for two cached functions, beside a bytecode file and another
    package's numba file that must survive."""
    cache = folder / "__pycache__"
    files = [cache / "kernel.serve-77.py311.nbi", cache / "kernel.serve-77.py311.nbc"]
    files += [cache / "step_math.step-1.py311.nbi"]
    for f in [*files, cache / "kernel.cpython-311.pyc", cache / "elsewhere.f-1.py311.nbi"]:
        f.write_bytes(b"x")
    return files


def test_a_changed_source_drops_the_compiled_cache_and_only_it(tmp_path):
    folder = package(tmp_path)
    numba_files = compiled(folder)
    assert refresh(folder)  # no digest stored yet: the cache may be from any version
    assert not any(f.exists() for f in numba_files)
    assert (folder / "__pycache__" / "kernel.cpython-311.pyc").exists()
    assert (folder / "__pycache__" / "elsewhere.f-1.py311.nbi").exists()
    assert (folder / "__pycache__" / STAMP).read_text() == sources_digest(folder)

    numba_files = compiled(folder)  # numba compiles afresh
    assert not refresh(folder)  # the same sources: the cache stays
    assert all(f.exists() for f in numba_files)

    (folder / "step_math.py").write_text("def step(): return 3\n")  # a callee changes
    assert refresh(folder)
    assert not any(f.exists() for f in numba_files)


def test_the_digest_moves_with_any_source_and_its_name(tmp_path):
    folder = package(tmp_path)
    before = sources_digest(folder)
    (folder / "kernel.py").rename(folder / "kernel2.py")
    assert sources_digest(folder) != before


def test_a_link_planted_at_the_stamp_is_replaced_not_written_through(tmp_path):
    folder = package(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (folder / "__pycache__" / STAMP).symlink_to(victim)
    refresh(folder)
    assert victim.read_text() == "keep me"
    stamp = folder / "__pycache__" / STAMP
    assert not stamp.is_symlink() and stamp.read_text() == sources_digest(folder)
    assert [p.name for p in (folder / "__pycache__").iterdir() if p.name.startswith(".")] == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_a_folder_that_cannot_be_written_is_left_alone(tmp_path):
    folder = package(tmp_path)
    numba_files = compiled(folder)
    (folder / "__pycache__").chmod(0o555)
    try:
        assert not refresh(folder)
        assert all(f.exists() for f in numba_files)
    finally:
        (folder / "__pycache__").chmod(0o755)


def test_the_simulators_package_is_stamped_once_it_has_loaded():
    """Importing a compiled module refreshes the serving package: its stamp then holds the
    digest of the sources as they are (where the checkout can be written)."""
    from infersize.core.serving import kernel  # noqa: F401  (loads numba, refreshes once)

    stamp = kernel_cache.PACKAGE / "__pycache__" / STAMP
    if os.access(kernel_cache.PACKAGE, os.W_OK):
        assert stamp.read_text() == sources_digest(kernel_cache.PACKAGE)


def test_a_cache_folder_that_is_not_one_is_left_alone(tmp_path):
    """Whatever stops the refresh (here a file where the cache folder would be; for a user, a
    read-only install) leaves things as they are and lets the simulator run."""
    folder = package(tmp_path)
    (folder / "__pycache__").rmdir()
    (folder / "__pycache__").write_text("not a folder")
    assert not refresh(folder)
    assert (folder / "__pycache__").read_text() == "not a folder"
