"""A sweep folder's tables as this release reads them, whatever release wrote them.

The manifest records the tables' schema (`tables_schema`, TABLES_SCHEMA at this release). A
folder without it was written before the number existed: schema 1, whose tables may lack the
columns added during its life. Reading a table brings it to TABLES_SCHEMA in one step per
schema, here, so that no reader asks how old a table is; a schema newer than this release's is
refused with one line, rather than read wrongly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infersize.errors import InfersizeError

if TYPE_CHECKING:  # `sweep run` reads TABLES_SCHEMA before its merge needs polars
    import polars as pl

TABLES_SCHEMA = 3

# Schema 1 -> 2: the columns added while schema 1 was current, each with what its absence meant
# then: a pair was a separate draft model (before methods), every request was held (before the
# capacity table recorded the models' context limits, the limits unknown), no row lay beyond a
# model's context and every fitting row was within it (before coverage recorded the limits; the
# limit unknown).
ADDED_DURING_SCHEMA_1: Mapping[str, Mapping[str, Any]] = {
    "best_pairs": {"method": "draft"},
    "frontier": {"method": "draft"},
    "capacity": {
        "within_max_context": True,
        "target_max_context_tokens": None,
        "draft_max_context_tokens": None,
    },
    "coverage": {
        "target_max_context_tokens": None,
        "beyond_max_context_rows": 0,
    },
}


def _from_schema_1(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    missing = {
        name: value
        for name, value in ADDED_DURING_SCHEMA_1.get(table, {}).items()
        if name not in frame.columns
    }
    if table == "coverage" and "fitting_within_max_context_rows" not in frame.columns:
        missing_rows = frame["fitting_rows"] if "fitting_rows" in frame.columns else 0
        frame = frame.with_columns(pl.lit(missing_rows).alias("fitting_within_max_context_rows"))
    return frame.with_columns([pl.lit(value).alias(name) for name, value in missing.items()])


# Schema 2 -> 3: the capacity table gains the rate above which speculation stops paying and
# the capacity of the K-by-batch table, neither computed before (null: unknown)
ADDED_IN_SCHEMA_3 = {"capacity": ("break_even_request_rate", "max_request_rate_k_schedule")}


def _from_schema_2(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    missing = [n for n in ADDED_IN_SCHEMA_3.get(table, ()) if n not in frame.columns]
    return frame.with_columns([pl.lit(None, dtype=pl.Float64).alias(n) for n in missing])


STEPS = {1: _from_schema_1, 2: _from_schema_2}  # schema -> the step to the next


def tables_schema(manifest: Mapping[str, Any]) -> int:
    """The schema a folder's manifest records (1: written before the number existed)."""
    schema = manifest.get("tables_schema", 1)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise InfersizeError(f"manifest.json: tables_schema must be a whole number, got {schema!r}")
    if schema > TABLES_SCHEMA:
        raise InfersizeError(
            f"the tables were written by a newer infersize (tables schema {schema}; this one reads "
            f"up to {TABLES_SCHEMA}): install that release to read them"
        )
    return schema


def upgrade(table: str, frame: pl.DataFrame, schema: int) -> pl.DataFrame:
    """`frame`, a `table` written at `schema`, as TABLES_SCHEMA reads it."""
    for step in range(schema, TABLES_SCHEMA):
        frame = STEPS[step](table, frame)
    return frame
