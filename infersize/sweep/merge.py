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
from contextlib import ExitStack, suppress
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from infersize.sweep.arrow_types import arrow_schema
from infersize.sweep.chunks import part_name, read_part
from infersize.sweep.store import walk
from infersize.sweep.store.generations import Generation
from infersize.sweep.store.walk import Dir
from infersize.sweep.tables import OutputTable


class _Sink(walk.WriteThrough):
    """A file the Parquet writer writes through, which can be told to drop what follows: an
    abandoned table (a full disk, an interrupted run) is closed into nothing, so the writer
    ends cleanly instead of failing again when it is collected."""

    def __init__(self, handle: BinaryIO) -> None:
        super().__init__(handle)
        self.dropped = False

    def pass_on(self, view: memoryview) -> None:
        if not self.dropped:
            self.handle.write(view)


class _StreamedTable:
    """One concatenated table's Parquet and CSV files, appended to part by part: temp files in
    the run's tmp/ folder, renamed into gen/ when whole."""

    def __init__(self, table: OutputTable) -> None:
        self.name = table.name
        self.schema = arrow_schema(table.columns)
        self.rows = 0
        self.header_written = False
        self.temps: dict[str, str] = {}  # final name -> temp name, for close() to move or remove
        self.handles: list[BinaryIO] = []
        self.sink: _Sink | None = None
        self.parquet: pq.ParquetWriter | None = None
        self.csv: BinaryIO | None = None

    def _new(self, tmp: Dir, final: str) -> BinaryIO:
        fd, self.temps[final] = walk.new_temp(tmp, final)
        handle = os.fdopen(fd, "wb")
        self.handles.append(handle)
        return handle

    def open(self, tmp: Dir, formats: list[str]) -> None:
        if "parquet" in formats:
            self.sink = _Sink(self._new(tmp, f"{self.name}.parquet"))
            self.parquet = pq.ParquetWriter(
                self.sink, self.schema, compression="zstd", write_statistics=True
            )
        if "csv" in formats:
            self.csv = self._new(tmp, f"{self.name}.csv")

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

    def close(self, keep: bool, gen: Dir, tmp: Dir) -> None:
        """Close the files; `keep` renames them into gen/, else (or when closing fails) they
        are removed, and the first failure is raised when keeping."""
        failure: BaseException | None = None
        parquet, self.parquet = self.parquet, None
        if parquet is not None and self.sink is not None:
            self.sink.dropped = not keep
            try:
                parquet.close()
            except (OSError, pa.ArrowException) as exc:
                failure = exc
                self.sink.dropped = True
                with suppress(OSError, pa.ArrowException):
                    parquet.close()  # into nothing: it cannot fail again when collected
        for handle in self.handles:
            try:
                handle.close()
            except OSError as exc:
                failure = failure or exc
        self.handles, self.csv = [], None
        for final, temp in self.temps.items():
            if keep and failure is None:
                walk.move(tmp, temp, gen, final)
            else:
                walk.unlink(tmp, temp)
        self.temps = {}
        if keep and failure is not None:
            raise failure


class TableMerge:
    """The run's final tables, fed chunk indices as they finish (in any order)."""

    def __init__(
        self,
        generation: Generation,
        tables: dict[str, OutputTable],
        n_chunks: int,
        formats: list[str],
    ) -> None:
        self.generation = generation
        self.tables = tables
        self.n_chunks = n_chunks
        self.formats = formats
        self.finished: set[int] = set()
        self.held: dict[int, dict[str, pa.Table]] = {}  # parts in memory, until appended
        self.next_index = 0
        self.streamed: dict[str, _StreamedTable] = {}
        self.folders = ExitStack()
        try:
            self.gen = self.folders.enter_context(generation.open("gen"))
            self.tmp = self.folders.enter_context(generation.open("tmp"))
            self.parts = {
                name: self.folders.enter_context(generation.open("parts", name)) for name in tables
            }
            for name, table in tables.items():
                if table.merge is None:
                    self.streamed[name] = _StreamedTable(table)
                    self.streamed[name].open(self.tmp, formats)
        except BaseException:
            self.abandon()
            raise

    def chunk_done(self, index: int, parts: dict[str, pa.Table] | None = None) -> None:
        """Append every part now next in chunk order: `parts` (the chunk's, in memory) or the
        files."""
        self.finished.add(index)
        if parts is not None:
            self.held[index] = parts
        while self.next_index in self.finished:
            held = self.held.pop(self.next_index, None)
            for name, stream in self.streamed.items():
                if held is None:
                    part = read_part(self.parts[name], part_name(self.next_index), mapped=True)
                    stream.append(part)  # dropped before the next: one map open at a time
                else:
                    stream.append(held[name])
            self.next_index += 1

    def finish(self) -> dict[str, int]:
        """Publishable tables: the streamed ones closed and renamed, the others merged."""
        if self.next_index != self.n_chunks:
            raise RuntimeError(f"merge ended at chunk {self.next_index} of {self.n_chunks}")
        rows = {}
        for name, stream in self.streamed.items():
            stream.close(True, self.gen, self.tmp)
            rows[name] = stream.rows
        for name, table in self.tables.items():
            if table.merge is not None:
                rows[name] = self._merge_whole(table)
        self.folders.close()
        return {name: rows[name] for name in self.tables}

    def abandon(self) -> None:
        """Remove every file not yet renamed into place (never raises)."""
        for stream in self.streamed.values():
            with suppress(OSError, pa.ArrowException):
                stream.close(False, self.gen, self.tmp)
        self.folders.close()

    def _merge_whole(self, table: OutputTable) -> int:
        """A table with a merge step: polars reads every part, merges, writes (each file a
        temp file in tmp/, renamed into gen/); returns its rows."""
        import polars as pl

        name = table.name
        parts = [read_part(self.parts[name], part_name(i)) for i in range(self.n_chunks)]
        frame = pl.LazyFrame(pa.concat_tables(parts))
        if table.merge is not None:
            frame = table.merge(frame)
        merged = frame.collect()
        schema = arrow_schema(table.columns)  # the data dictionary travels as field metadata
        writers = {
            "parquet": lambda handle: merged.lazy().sink_parquet(
                handle, compression="zstd", statistics=True, arrow_schema=schema
            ),
            "csv": lambda handle: merged.lazy().sink_csv(handle),
        }
        for kind in (k for k in writers if k in self.formats):
            walk.write_file(self.gen, f"{name}.{kind}", self.tmp, writers[kind])
        return int(merged.height)
