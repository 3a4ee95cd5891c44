"""The data dictionary as the files carry it: each table's Arrow schema, every field with its
unit and meaning as metadata (what the Parquet files hold), and schema.json beside the tables
(so CSV readers type all-null columns)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa

from infersize.sweep.columns import Column

ARROW_TYPES = {
    "str": pa.large_string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
}


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    """The Arrow schema of a table holding `columns`, each field with its unit and meaning."""
    return pa.schema(
        [
            pa.field(
                c.name,
                ARROW_TYPES[c.kind],
                metadata={"unit": c.unit, "description": c.description},
            )
            for c in columns
        ]
    )


def schema_json(tables: Mapping[str, Sequence[Column]]) -> str:
    """Each table's columns with their types, units and meanings (for CSV readers)."""
    return json.dumps(
        {
            table: [
                {"name": c.name, "type": c.kind, "unit": c.unit, "description": c.description}
                for c in columns
            ]
            for table, columns in tables.items()
        },
        indent=2,
    )
