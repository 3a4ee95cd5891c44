"""Numba keys a cached compiled function on its own source file alone, while a function compiled
with cache=True holds the compiled code of every jitted function it calls, from any file: once
`serve` (core/serving/kernel.py) is cached, a change to the step formula in step_math.py, which
it calls, would leave the cache serving the old formula until kernel.py itself changes. So before
the simulator's modules compile anything, the package's numba cache files are removed wherever
one of its sources was written after the oldest of them, to be compiled afresh (about 15 s,
once): a checkout or an upgrade writes the sources it changes, numba writes its files after the
sources it compiled.

Only numba's files for this package's modules are removed (`<module>.<function>-<line>.py3X.nbi`
and `.nbc`), nothing is written, and a link among them is removed as a link. Where the folder
cannot be changed (an installed, read-only copy, whose cache numba keeps elsewhere) nothing is
done. No numba import here: `spec` never loads it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
NUMBA_SUFFIXES = (".nbi", ".nbc")


def numba_files(directory: Path) -> list[Path]:
    """The folder's numba cache files for its own modules."""
    cache_dir = directory / "__pycache__"
    if not cache_dir.is_dir():
        return []
    modules = {source.stem for source in directory.glob("*.py")}
    return [
        f
        for f in cache_dir.iterdir()
        if f.suffix in NUMBA_SUFFIXES and f.name.split(".", 1)[0] in modules
    ]


def refresh(directory: Path = PACKAGE) -> bool:
    """Remove the folder's numba cache files if any of its sources is newer than the oldest of
    them; True where it removed any. Silent where the folder cannot be changed."""
    try:
        compiled = numba_files(directory)
        if not compiled:
            return False
        newest_source = max(source.stat().st_mtime_ns for source in directory.glob("*.py"))
        oldest_cache = min(f.lstat().st_mtime_ns for f in compiled)
        if newest_source <= oldest_cache:
            return False
        for f in compiled:
            f.unlink(missing_ok=True)
    except OSError:
        return False
    return True


@cache
def refresh_once() -> None:
    """`refresh` of this package, once a process (each compiled module calls it on import)."""
    refresh()
