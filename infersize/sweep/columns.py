"""The data dictionary of the sweep's tables: every column's type, unit and meaning, in the order
the tables hold them. The Parquet files carry it as field metadata, the output folder as
schema.json (so CSV readers type all-null columns), and docs/tables.md is generated from it
(`python -m infersize.sweep.columns > docs/tables.md`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

Kind = Literal["str", "int", "float", "bool"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    unit: str  # "" for names and flags
    description: str
    decimals: int | None = None  # stored rounded: the value is a rounded quantity


GIB = "GiB (2^30 bytes) per GPU"
COLUMNS: tuple[Column, ...] = (
    Column("gpu", "str", "", "GPU catalog id (configs/gpus.yaml)"),
    Column("gpu_name", "str", "", "the GPU's marketed name"),
    Column("tp", "int", "GPUs", "tensor-parallel size of the target (GPUs of the deployment)"),
    Column("target", "str", "", "target model id"),
    Column("target_quant", "str", "", "target weight precision (configs/precisions.yaml)"),
    Column("draft", "str", "", "draft model id"),
    Column("draft_quant", "str", "", "draft weight precision"),
    Column(
        "method",
        "str",
        "",
        "speculative method, vLLM's names: draft (a separate model), eagle, eagle3, mtp, "
        "medusa, mlp-speculator, ngram (docs/modelling.md)",
    ),
    Column("kv_dtype", "str", "", "KV cache dtype of both models"),
    Column("engine", "str", "", "engine preset: memory rules and latency constants"),
    Column("speedup_model", "str", "", "the model that produced speedup (docs/modelling.md)"),
    Column(
        "support",
        "str",
        "",
        "native: the GPU runs both precisions natively; weight-only: at least one runs through "
        "dequantising kernels (priced in the speed model)",
    ),
    Column("context_length", "int", "tokens", "tokens per sequence"),
    Column("batch_size", "int", "sequences", "concurrent sequences"),
    Column(
        "acceptance_scenario",
        "int",
        "",
        "position of the α scenario (rows of one scenario are compared with each other)",
    ),
    Column("acceptance_rate", "float", "probability", "α: chance that one draft token is accepted"),
    Column(
        "acceptance_source",
        "str",
        "",
        "where α comes from: sweep (the what-if acceptance_rates), pair (the pair's own list), "
        "profile (the pair's per-position acceptance_profile; α is the i.i.d. rate with its "
        "mean acceptance length), published (a measured figure for this pair), method (a head's "
        "method's published figures) or prior (fitted to published figures)",
    ),
    Column("optimal_k", "int", "tokens", "K: draft tokens per step, the best that fits"),
    Column("speedup", "float", "x", "decode speedup over the target alone at this batch"),
    Column(
        "expected_tokens_per_step",
        "float",
        "tokens",
        "E = (1 − α^(K+1)) / (1 − α); 1 + r_1 + … + r_K for a per-position profile",
    ),
    Column("latency_ratio", "float", "x", "γ = target step time / draft step time"),
    Column("target_weights_gib", "float", GIB, "target weights"),
    Column("target_kv_gib", "float", GIB, "target KV cache (context + K slots, all sequences)"),
    Column("target_workspace_gib", "float", GIB, "target logits and activations"),
    Column("target_gib", "float", GIB, "target weights + KV cache + workspace"),
    Column("draft_weights_gib", "float", GIB, "draft weights"),
    Column("draft_kv_gib", "float", GIB, "draft KV cache"),
    Column("draft_workspace_gib", "float", GIB, "draft logits and activations"),
    Column("draft_gib", "float", GIB, "draft weights + KV cache + workspace"),
    Column("overhead_gib", "float", GIB, "runtime overhead of the engine process", 6),
    Column("combined_gib", "float", GIB, "target + draft + overhead"),
    Column("gpu_memory_gib", "float", "GiB (2^30 bytes)", "GPU memory as the CUDA runtime reports"),
    Column("utilization", "float", "share", "combined / GPU memory"),
    Column("fits", "bool", "", "within the engine's budget (always true in these tables)"),
    Column("verdict", "str", "", "safe (≤ 90% of the budget) or tight (≤ 100%)"),
    Column(
        "kv_pool_gib",
        "float",
        GIB,
        "vLLM: the KV pool after weights, activations, non-torch memory and CUDA graphs",
    ),
    Column("kv_pool_tokens", "int", "tokens", "vLLM: 'GPU KV cache size', as vLLM logs it"),
    Column(
        "max_concurrent_sequences",
        "float",
        "sequences",
        "vLLM: sequences of this context the pool holds at once",
    ),
    Column("baseline_tokens_per_s", "float", "tokens/s", "decode throughput of the target alone"),
    Column("speculative_tokens_per_s", "float", "tokens/s", "decode throughput with speculation"),
    Column(
        "speculative_tokens_per_s_per_gpu", "float", "tokens/s", "speculative_tokens_per_s / tp"
    ),
    Column("baseline_ms_per_token", "float", "ms", "time per token of one sequence, no draft"),
    Column("speculative_ms_per_token", "float", "ms", "time per token of one sequence"),
    Column("price_usd_per_hour", "float", "USD per GPU-hour", "the price used", 6),
    Column("usd_per_mtok", "float", "USD per million tokens", "price · tp / throughput"),
    Column(
        "crossover_batch_size",
        "int",
        "sequences",
        "smallest batch (1 to 2048, doubling) at which speculation at this α and K stops "
        "paying under the roofline model, whether or not it fits; null: none up to 2048",
    ),
    Column("cell_key", "str", "", "a stable, readable identity of the row for joins and diffs"),
    Column("rank", "int", "", "best_pairs only: 1 = most speculative tokens/s per GPU"),
)
COVERAGE_COLUMNS: tuple[Column, ...] = (
    Column("gpu", "str", "", "GPU catalog id"),
    Column("target", "str", "", "target model id"),
    Column("rows", "int", "rows", "settings × contexts × batches × scenarios scored"),
    Column("fitting_rows", "int", "rows", "of them, those where some K fits"),
    Column(
        "closest_share_of_budget",
        "float",
        "share",
        "the least memory any row needs, as a share of the engine's budget (≤ 1 fits)",
    ),
    Column("closest_tp", "int", "GPUs", "that row's tensor-parallel size"),
    Column("closest_target_quant", "str", "", "that row's target precision"),
    Column("closest_draft", "str", "", "that row's draft"),
    Column("closest_draft_quant", "str", "", "that row's draft precision"),
    Column("closest_kv_dtype", "str", "", "that row's KV cache dtype"),
    Column("closest_context_length", "int", "tokens", "that row's context"),
    Column("closest_batch_size", "int", "sequences", "that row's batch"),
)
BY_NAME = {c.name: c for c in COVERAGE_COLUMNS} | {c.name: c for c in COLUMNS}
ARROW_TYPES = {
    "str": pa.large_string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
}


def arrow_schema(names: Sequence[str]) -> pa.Schema:
    """The Arrow schema of a table holding `names`, each field with its unit and meaning."""
    return pa.schema(
        [
            pa.field(
                n,
                ARROW_TYPES[BY_NAME[n].kind],
                metadata={"unit": BY_NAME[n].unit, "description": BY_NAME[n].description},
            )
            for n in names
        ]
    )


def table_names(with_rank: bool) -> list[str]:
    return [c.name for c in COLUMNS if with_rank or c.name != "rank"]


def schema_json(tables: Mapping[str, Sequence[str]]) -> str:
    """Each table's columns with their types, units and meanings (for CSV readers)."""
    return json.dumps(
        {
            table: [
                {"name": n, "type": BY_NAME[n].kind, "unit": BY_NAME[n].unit}
                | {"description": BY_NAME[n].description}
                for n in names
            ]
            for table, names in tables.items()
        },
        indent=2,
    )


def markdown() -> str:
    lines = [
        "# The sweep's tables: a data dictionary",
        "",
        "Generated from `infersize/sweep/columns.py` (`python -m infersize.sweep.columns`).",
        "`frontier` and `best_pairs` hold these columns in this order (`rank` only in",
        "`best_pairs`); the Parquet files carry each description and unit as field metadata,",
        "and each output folder has `schema.json` with the types for CSV readers.",
        "",
        "| column | type | unit | meaning |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| `{c.name}` | {c.kind} | {c.unit} | {c.description} |" for c in COLUMNS]
    lines += [
        "",
        "## coverage",
        "",
        "One row per (GPU, target) swept, so that `best` can tell a target that was never",
        "swept from one that was swept but never fits, and say what came closest.",
        "",
        "| column | type | unit | meaning |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| `{c.name}` | {c.kind} | {c.unit} | {c.description} |" for c in COVERAGE_COLUMNS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
