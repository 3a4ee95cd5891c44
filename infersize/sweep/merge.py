"""Merging the chunks' parts into the run's final tables, while the chunks are scored.

Tables that are plain concatenations of their parts in chunk order (frontier, best_pairs) are
streamed: as soon as chunks 0..i are all done, their parts are appended to NAME.parquet (one
row group per part) and NAME.csv, so with workers scoring the next chunks the main process
writes in parallel instead of after them. Tables with a merge step of their own (coverage) are
small and are merged by polars at the end. Every file is written under a fresh exclusive temp
name and renamed into place only when whole; a failure removes the temp files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from infersize.files import temp_beside
from infersize.sweep.chunks import part_name, read_part
from infersize.sweep.columns import arrow_schema
from infersize.sweep.output import Generation
from infersize.sweep.tables import OUTPUT_TABLES


def _part(generation: Generation, table: str, index: int) -> Path:
    return generation.parts / table / part_name(index)


class _StreamedTable:
    """One concatenated table's Parquet and CSV files, appended to part by part."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.schema = arrow_schema(OUTPUT_TABLES[name].columns)
        self.rows = 0
        self.header_written = False
        self.temps: dict[Path, str] = {}  # every temp file made, for close() to remove
        self.parquet: pq.ParquetWriter | None = None
        self.csv: BinaryIO | None = None

    def open(self, folder: Path, formats: list[str]) -> None:
        name = self.name
        if "parquet" in formats:
            path = folder / f"{name}.parquet"
            fd, self.temps[path] = temp_beside(path)
            os.close(fd)
            self.parquet = pq.ParquetWriter(
                self.temps[path], self.schema, compression="zstd", write_statistics=True
            )
        if "csv" in formats:
            path = folder / f"{name}.csv"
            fd, self.temps[path] = temp_beside(path)
            self.csv = os.fdopen(fd, "wb")

    def append(self, part: pa.Table) -> None:
        import polars as pl

        part = part.select(self.schema.names).cast(self.schema)
        if self.parquet is not None:
            self.parquet.write_table(part)
        if self.csv is not None:  # polars formats the numbers, as it did for the whole table
            frame = pl.from_arrow(part)
            assert isinstance(frame, pl.DataFrame)
            frame.write_csv(self.csv, include_header=not self.header_written)
            self.header_written = True
        self.rows += part.num_rows

    def close(self, keep: bool) -> None:
        """Close the files; `keep` renames them into place, else they are removed."""
        parquet, csv, self.parquet, self.csv = self.parquet, self.csv, None, None
        if parquet is not None:
            parquet.close()
        if csv is not None:
            csv.close()
        for path, tmp in self.temps.items():
            if keep:
                Path(tmp).replace(path)
            else:
                Path(tmp).unlink(missing_ok=True)


class TableMerge:
    """The run's final tables, fed chunk indices as they finish (in any order)."""

    def __init__(self, generation: Generation, n_chunks: int, formats: list[str]) -> None:
        self.generation = generation
        self.n_chunks = n_chunks
        self.formats = formats
        self.finished: set[int] = set()
        self.next_index = 0
        self.streamed: dict[str, _StreamedTable] = {}
        for stale in generation.gen.glob(".*.tmp"):  # a killed run's, when resuming it
            stale.unlink()
        try:
            for name, table in OUTPUT_TABLES.items():
                if table.merge is None:
                    self.streamed[name] = _StreamedTable(name)
                    self.streamed[name].open(generation.gen, formats)
        except BaseException:
            self.abandon()
            raise

    def chunk_done(self, index: int) -> None:
        """Append every part now next in chunk order."""
        self.finished.add(index)
        while self.next_index in self.finished:
            for name, stream in self.streamed.items():
                stream.append(read_part(_part(self.generation, name, self.next_index)))
            self.next_index += 1

    def finish(self) -> dict[str, int]:
        """Publishable tables: the streamed ones closed and renamed, the others merged."""
        if self.next_index != self.n_chunks:
            raise RuntimeError(f"merge ended at chunk {self.next_index} of {self.n_chunks}")
        rows = {}
        for name, stream in self.streamed.items():
            stream.close(keep=True)
            rows[name] = stream.rows
        for name, table in OUTPUT_TABLES.items():
            if table.merge is not None:
                rows[name] = _merge_whole(self.generation, name, self.n_chunks, self.formats)
        return {name: rows[name] for name in OUTPUT_TABLES}

    def abandon(self) -> None:
        for stream in self.streamed.values():
            stream.close(keep=False)


def _sink(frame: Any, path: Path, kind: str, schema: pa.Schema | None = None) -> None:
    """polars writes to a fresh exclusive temp name beside `path`, then one rename."""
    fd, tmp = temp_beside(path)
    os.close(fd)
    try:
        if kind == "parquet":
            frame.sink_parquet(tmp, compression="zstd", statistics=True, arrow_schema=schema)
        else:
            frame.sink_csv(tmp)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _merge_whole(generation: Generation, name: str, n_chunks: int, formats: list[str]) -> int:
    """A table with a merge step: polars reads every part, merges, writes; returns its rows."""
    import polars as pl

    table = OUTPUT_TABLES[name]
    files = [str(_part(generation, name, i)) for i in range(n_chunks)]
    frame = pl.scan_ipc(files)
    if table.merge is not None:
        frame = table.merge(frame)
    if "parquet" in formats:  # the data dictionary travels as field metadata
        _sink(frame, generation.gen / f"{name}.parquet", "parquet", arrow_schema(table.columns))
    if "csv" in formats:
        _sink(frame, generation.gen / f"{name}.csv", "csv")
    if "parquet" in formats:  # the count is in the footer just written
        return int(pq.read_metadata(generation.gen / f"{name}.parquet").num_rows)
    return int(frame.select(pl.len()).collect().item())
