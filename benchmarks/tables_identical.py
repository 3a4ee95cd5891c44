"""Whether a change left every answer alone: run each shipped sweep (sweeps/*.yaml) and take the
SHA-256 of every table it writes (Parquet and CSV; the manifest without its timings), then write
them to a file or compare them with one written before the change.

Usage:
  python benchmarks/tables_identical.py --write BEFORE.json     # on the commit before
  python benchmarks/tables_identical.py --check BEFORE.json     # on the commit after

Exit code 0 when every table is byte-identical, 1 with the tables that differ listed. A Parquet
table whose rows and columns are identical but whose data dictionary (the columns' descriptions,
carried as field metadata) changed is listed apart, as a change of wording, not of answers. The
sweeps run with --jobs 2 (tables are byte-identical whatever --jobs), into a scratch folder
removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what a manifest says of the run rather than of its answers: when, how fast, the command line
# (with its output folder), the version that ran it and the number of its tables' format
VOLATILE = (
    "started_at",
    "finished_at",
    "seconds",
    "cells_per_s",
    "chunks_resumed",
    "version",
    "command_line",
    "tables_schema",
)


def _manifest_digest(path: Path) -> str:
    manifest = json.loads(path.read_text())
    for key in VOLATILE:
        manifest.pop(key, None)
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _data_digest(path: Path) -> str:
    """SHA-256 of a Parquet table's names, types and values, without its metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    plain = pa.schema([pa.field(f.name, f.type) for f in table.schema])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, plain) as stream:
        stream.write_table(table.cast(plain))
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def digests(sweeps: list[Path]) -> dict[str, str]:
    """sweep/table -> SHA-256 of the table's bytes, for every table each sweep writes (and
    sweep/table#data -> its data's, for Parquet)."""
    exe = shutil.which("infersize")
    if exe is None:
        sys.exit("infersize is not on PATH: install the project first")
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for sweep in sweeps:
            folder = Path(scratch) / sweep.stem
            subprocess.run(
                [exe, "sweep", "run", str(sweep), "--out", str(folder), "--jobs", "2", "--quiet"],
                check=True,
                capture_output=True,
            )
            for table in sorted(folder.iterdir()):
                if table.name == "manifest.json":
                    out[f"{sweep.stem}/{table.name}"] = _manifest_digest(table)
                elif table.suffix in (".parquet", ".csv"):
                    out[f"{sweep.stem}/{table.name}"] = hashlib.sha256(
                        table.read_bytes()
                    ).hexdigest()
                if table.suffix == ".parquet":
                    out[f"{sweep.stem}/{table.name}#data"] = _data_digest(table)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path)
    action.add_argument("--check", type=Path)
    args = parser.parse_args()
    found = digests(sorted((ROOT / "sweeps").glob("*.yaml")))
    if args.write:
        args.write.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
        print(f"{len(found)} tables of {len({k.split('/')[0] for k in found})} sweeps")
        return
    before = json.loads(args.check.read_text())
    tables = sorted(k for k in found if "#" not in k)
    changed = [k for k in tables if before.get(k) != found[k]]
    # same rows, types and values: only the data dictionary's words moved
    worded = [
        k
        for k in changed
        if k.endswith(".parquet") and before.get(k + "#data") == found[k + "#data"]
    ]
    differ = sorted(set(changed) - set(worded) | (before.keys() - found.keys()))
    print(
        f"{len(tables)} tables, {len(differ)} differ, {len(worded)} differ only in their column "
        "descriptions"
        + "".join(f"\n  {k}" for k in differ)
        + "".join(f"\n  {k} (descriptions)" for k in worded)
    )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
