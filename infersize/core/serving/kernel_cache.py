"""Numba keys a cached compiled function on its own source file alone, while a function compiled
with cache=True holds the compiled code of every jitted function it calls, from any file: once
`serve` (core/serving/kernel.py) is cached, a change to the step formula in step_math.py, which
it calls, would leave the cache serving the old formula until kernel.py itself changes. So before
the simulator's modules compile anything, a digest of this package's sources is compared with the
one stored beside their cache; where it differs, the package's numba cache files are removed, to
be compiled afresh (about 15 s, once).

Only numba's files for this package's modules are removed (`<module>.<function>-<line>.py3X.nbi`
and `.nbc`); the digest is written to a temporary file and moved into place, so a link planted at
its name is replaced, never written through. Where the package's folder cannot be written (an
installed, read-only copy), numba keeps its cache elsewhere and an upgrade rewrites every source
file, which numba does see; nothing is done then. No numba import here: `spec` never loads it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
STAMP = "infersize-kernels.sha256"
NUMBA_SUFFIXES = (".nbi", ".nbc")


def sources_digest(directory: Path) -> str:
    """SHA-256 over the names and bytes of the folder's Python sources, in name order."""
    digest = hashlib.sha256()
    for source in sorted(directory.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


def _numba_files(cache_dir: Path, modules: set[str]) -> list[Path]:
    return [
        f
        for f in cache_dir.iterdir()
        if f.suffix in NUMBA_SUFFIXES and f.name.split(".", 1)[0] in modules and f.is_file()
    ]


def refresh(directory: Path = PACKAGE) -> bool:
    """Remove the folder's numba cache files if its sources changed since they were stored;
    True where it removed any. Silent where the folder cannot be written."""
    cache_dir = directory / "__pycache__"
    digest = sources_digest(directory)
    stamp = cache_dir / STAMP
    try:
        if stamp.is_file() and not stamp.is_symlink() and stamp.read_text() == digest:
            return False
        cache_dir.mkdir(exist_ok=True)
        modules = {source.stem for source in directory.glob("*.py")}
        stale = _numba_files(cache_dir, modules)
        for f in stale:
            f.unlink(missing_ok=True)
        _write(stamp, digest)
    except OSError:
        return False
    return bool(stale)


def _write(path: Path, text: str) -> None:
    """`text` into a new file beside `path`, then moved onto it (a link there is replaced)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".stamp-")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@cache
def refresh_once() -> None:
    """`refresh` of this package, once a process (each compiled module calls it on import)."""
    refresh()
