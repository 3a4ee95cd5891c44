"""docs/tables.md, the data dictionary of every table a sweep writes, generated from the columns
the tables are built with (`python -m infersize.sweep.dictionary > docs/tables.md`)."""

from __future__ import annotations

from collections.abc import Sequence

from infersize.sweep.capacity.columns import CAPACITY_COLUMNS
from infersize.sweep.columns import COLUMNS, COVERAGE_COLUMNS, Column

HEADER = ["| column | type | unit | meaning |", "| --- | --- | --- | --- |"]


def _rows(columns: Sequence[Column]) -> list[str]:
    return [*HEADER, *(f"| `{c.name}` | {c.kind} | {c.unit} | {c.description} |" for c in columns)]


def markdown() -> str:
    lines = [
        "# The sweep's tables: a data dictionary",
        "",
        "Generated from the columns the tables are built with",
        "(`python -m infersize.sweep.dictionary > docs/tables.md`). `frontier` and `best_pairs`",
        "hold these columns in this order (`rank` only in `best_pairs`); the Parquet files carry",
        "each description and unit as field metadata, and each output folder has `schema.json`",
        "with the types for CSV readers.",
        "",
        "**The context axis.** `context_length` is the number of tokens each sequence holds in",
        "its KV cache at a decode step: the prompt plus the answer so far. A request of I prompt",
        "and O answer tokens decodes O steps holding about I to I + O tokens, so its steps",
        "average I + O/2; a sweep file may give `input_tokens` and `output_tokens` instead of",
        "`context_lengths` (every combination becomes a context of input + output/2, rounded",
        "down), as `infersize spec` takes `--input-tokens` and `--output-tokens` instead of",
        "`--context-length`. Sizing at I + O would price every step as the answer's last one.",
        "",
        *_rows(COLUMNS),
        "",
        "## coverage",
        "",
        "One row per (GPU, target) swept, so that `best` can tell a target that was never",
        "swept from one that was swept but never fits, and say what came closest.",
        "",
        *_rows(COVERAGE_COLUMNS),
        "",
        "## capacity",
        "",
        "Written when the sweep file has `workloads:` and `slas:`. One row per (GPU, TP, target,",
        "target precision, KV dtype, method, draft, draft precision, workload, SLA, α scenario,",
        "target request rate): the most requests per second one replica serves within the SLA",
        "with plain decoding and with speculation at the K that serves the most, and the replicas",
        "and GPUs the target rate needs each way. Names are those of `infersize capacity --json`,",
        "with the arm (`baseline`, `speculative`) as a suffix where the JSON nests it.",
        "",
        *_rows(CAPACITY_COLUMNS),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
