"""The data dictionary of the sweep's tables: every column's type, unit and meaning, in the order
the tables hold them. The Parquet files carry it as field metadata and the output folder as
schema.json (sweep/arrow_types.py), and docs/tables.md is generated from it with the capacity
table's (`python -m infersize.sweep.dictionary > docs/tables.md`)."""

from __future__ import annotations

from typing import Literal

from infersize.record import record

Kind = Literal["str", "int", "float", "bool"]


@record
class Column:
    name: str
    kind: Kind
    unit: str  # "" for names and flags
    description: str
    decimals: int | None = None  # stored rounded: the value is a rounded quantity


GIB = "GiB (2^30 bytes) per GPU"
# The columns that say which deployment a row is, declared once for every table that has them
# (the decode tables and the capacity table); each of SETTING_COLUMNS is the attribute of that
# name of the row's Setting, so a row builder iterates them rather than spelling them out
IDENTITY: dict[str, Column] = {
    c.name: c
    for c in (
        Column(name="gpu", kind="str", unit="", description="GPU catalog id (configs/gpus.yaml)"),
        Column(name="gpu_name", kind="str", unit="", description="the GPU's marketed name"),
        Column(
            name="tp",
            kind="int",
            unit="GPUs",
            description="tensor-parallel size of the target: the GPUs of one deployment (one "
            "replica)",
        ),
        Column(name="target", kind="str", unit="", description="target model id"),
        Column(
            name="target_quant",
            kind="str",
            unit="",
            description="target weight precision (configs/precisions.yaml)",
        ),
        Column(
            name="draft",
            kind="str",
            unit="",
            description="draft model or speculator head id (ngram: n-gram lookup)",
        ),
        Column(name="draft_quant", kind="str", unit="", description="draft weight precision"),
        Column(
            name="method",
            kind="str",
            unit="",
            description="speculative method, vLLM's names: draft (a separate model), eagle, "
            "eagle3, mtp, medusa, mlp-speculator, ngram (docs/modelling.md)",
        ),
        Column(name="kv_dtype", kind="str", unit="", description="KV cache dtype of both models"),
        Column(
            name="engine",
            kind="str",
            unit="",
            description="engine preset: memory rules and latency constants",
        ),
        Column(
            name="acceptance_scenario",
            kind="int",
            unit="",
            description="position of the α scenario (rows of one scenario are compared with "
            "each other)",
        ),
    )
}
SETTING_COLUMNS = (
    "gpu",
    "tp",
    "target",
    "target_quant",
    "draft",
    "draft_quant",
    "method",
    "kv_dtype",
)

COLUMNS: tuple[Column, ...] = (
    *(
        IDENTITY[name]
        for name in (
            "gpu",
            "gpu_name",
            "tp",
            "target",
            "target_quant",
            "draft",
            "draft_quant",
            "method",
            "kv_dtype",
            "engine",
        )
    ),
    Column(
        name="speedup_model",
        kind="str",
        unit="",
        description="the model that produced speedup (docs/modelling.md)",
    ),
    Column(
        name="support",
        kind="str",
        unit="",
        description="native: the GPU runs both precisions natively; weight-only: at least one "
        "runs through "
        "dequantising kernels (priced in the speed model)",
    ),
    Column(
        name="context_length",
        kind="int",
        unit="tokens",
        description="tokens each sequence holds in the KV cache at a decode step (prompt + "
        "answer so far); a sweep given input_tokens and output_tokens has input + output/2, "
        "what a request's decode steps average",
    ),
    Column(name="batch_size", kind="int", unit="sequences", description="concurrent sequences"),
    Column(
        name="within_max_context",
        kind="bool",
        unit="",
        description="context_length is at most target_max_context_tokens and "
        "draft_max_context_tokens: false rows are what-ifs the models cannot run (without "
        "rope scaling) and never rank in best_pairs or `infersize best`",
    ),
    Column(
        name="target_max_context_tokens",
        kind="int",
        unit="tokens",
        description="the target's max_position_embeddings: the longest sequence it holds",
    ),
    Column(
        name="draft_max_context_tokens",
        kind="int",
        unit="tokens",
        description="the draft model's max_position_embeddings; null for heads and n-gram "
        "lookup, whose positions are the target's",
    ),
    IDENTITY["acceptance_scenario"],
    Column(
        name="acceptance_rate",
        kind="float",
        unit="probability",
        description="α: chance that one draft token is accepted",
    ),
    Column(
        name="acceptance_source",
        kind="str",
        unit="",
        description="where α comes from: sweep (the what-if acceptance_rates), pair (the pair's "
        "own list), "
        "profile (the pair's per-position acceptance_profile; α is the i.i.d. rate with its "
        "mean acceptance length), published (a measured figure for this pair), method (a head's "
        "method's published figures) or prior (fitted to published figures)",
    ),
    Column(
        name="optimal_k",
        kind="int",
        unit="tokens",
        description="K: draft tokens per step, the best that fits",
    ),
    Column(
        name="speedup",
        kind="float",
        unit="x",
        description="decode speedup over the target alone at this batch",
    ),
    Column(
        name="expected_tokens_per_step",
        kind="float",
        unit="tokens",
        description="E = (1 − α^(K+1)) / (1 − α); 1 + r_1 + … + r_K for a per-position profile",
    ),
    Column(
        name="latency_ratio",
        kind="float",
        unit="x",
        description="γ = target step time / draft step time",
    ),
    Column(name="target_weights_gib", kind="float", unit=GIB, description="target weights"),
    Column(
        name="target_kv_gib",
        kind="float",
        unit=GIB,
        description="target KV cache (context + K slots, all sequences)",
    ),
    Column(
        name="target_workspace_gib",
        kind="float",
        unit=GIB,
        description="target logits and activations",
    ),
    Column(
        name="target_gib",
        kind="float",
        unit=GIB,
        description="target weights + KV cache + workspace",
    ),
    Column(name="draft_weights_gib", kind="float", unit=GIB, description="draft weights"),
    Column(name="draft_kv_gib", kind="float", unit=GIB, description="draft KV cache"),
    Column(
        name="draft_workspace_gib",
        kind="float",
        unit=GIB,
        description="draft logits and activations",
    ),
    Column(
        name="draft_gib", kind="float", unit=GIB, description="draft weights + KV cache + workspace"
    ),
    Column(
        name="overhead_gib",
        kind="float",
        unit=GIB,
        description="runtime overhead of the engine process",
        decimals=6,
    ),
    Column(name="combined_gib", kind="float", unit=GIB, description="target + draft + overhead"),
    Column(
        name="gpu_memory_gib",
        kind="float",
        unit="GiB (2^30 bytes)",
        description="GPU memory as the CUDA runtime reports",
    ),
    Column(name="utilization", kind="float", unit="share", description="combined / GPU memory"),
    Column(
        name="fits",
        kind="bool",
        unit="",
        description="within the engine's budget (always true in these tables)",
    ),
    Column(
        name="verdict",
        kind="str",
        unit="",
        description="safe (≤ 90% of the budget) or tight (≤ 100%)",
    ),
    Column(
        name="confidence",
        kind="str",
        unit="",
        description="how far the speeds can be trusted: low for a mixture-of-experts target "
        "whose decode step at this batch selects fewer experts than a layer holds (batch × "
        "experts per token < experts), where dispatch, router and launch costs are priced "
        "only as a fixed cost per MoE layer and public batch-1 measurements are both slower and "
        "faster than priced (docs/modelling.md); high otherwise",
    ),
    Column(
        name="kv_pool_gib",
        kind="float",
        unit=GIB,
        description="vLLM: the KV pool after weights, activations, non-torch memory and CUDA "
        "graphs",
    ),
    Column(
        name="kv_pool_tokens",
        kind="int",
        unit="tokens",
        description="vLLM: 'GPU KV cache size', as vLLM logs it",
    ),
    Column(
        name="max_concurrent_sequences",
        kind="float",
        unit="sequences",
        description="vLLM: sequences of this context the pool holds at once",
    ),
    Column(
        name="baseline_tokens_per_s",
        kind="float",
        unit="tokens/s",
        description="decode throughput of the target alone",
    ),
    Column(
        name="speculative_tokens_per_s",
        kind="float",
        unit="tokens/s",
        description="decode throughput with speculation",
    ),
    Column(
        name="speculative_tokens_per_s_per_gpu",
        kind="float",
        unit="tokens/s",
        description="speculative_tokens_per_s / tp",
    ),
    Column(
        name="baseline_ms_per_token",
        kind="float",
        unit="ms",
        description="time per token of one sequence, no draft",
    ),
    Column(
        name="speculative_ms_per_token",
        kind="float",
        unit="ms",
        description="time per token of one sequence",
    ),
    Column(
        name="price_usd_per_hour",
        kind="float",
        unit="USD per GPU-hour",
        description="the GPU's hourly price used",
        decimals=6,
    ),
    Column(
        name="usd_per_mtok",
        kind="float",
        unit="USD per million tokens",
        description="price · tp / throughput",
    ),
    Column(
        name="crossover_batch_size",
        kind="int",
        unit="sequences",
        description="smallest batch (1 to 2048, doubling) at which speculation at this α and K "
        "stops "
        "paying under the roofline model, whether or not it fits; null: none up to 2048",
    ),
    Column(
        name="cell_key",
        kind="str",
        unit="",
        description="a stable, readable identity of the row for joins and diffs",
    ),
    Column(
        name="rank",
        kind="int",
        unit="",
        description="best_pairs only: 1 = most speculative tokens/s per GPU, ties broken by "
        "the higher speedup, then the less memory (the rule of `best` and every figure's ★)",
    ),
)
COVERAGE_COLUMNS: tuple[Column, ...] = (
    Column(name="gpu", kind="str", unit="", description="GPU catalog id"),
    Column(name="target", kind="str", unit="", description="target model id"),
    Column(
        name="rows",
        kind="int",
        unit="rows",
        description="settings × contexts × batches × scenarios scored",
    ),
    Column(
        name="fitting_rows", kind="int", unit="rows", description="of them, those where some K fits"
    ),
    Column(
        name="beyond_max_context_rows",
        kind="int",
        unit="rows",
        description="of the rows scored, those at a context longer than the target or its draft "
        "holds (within_max_context false): they never rank",
    ),
    Column(
        name="fitting_within_max_context_rows",
        kind="int",
        unit="rows",
        description="rows that fit and are within the models' max context: those that can rank",
    ),
    Column(
        name="target_max_context_tokens",
        kind="int",
        unit="tokens",
        description="the target's max_position_embeddings",
    ),
    Column(
        name="closest_share_of_budget",
        kind="float",
        unit="share",
        description="the least memory any row needs, as a share of the engine's budget (≤ 1 fits)",
    ),
    Column(
        name="closest_tp", kind="int", unit="GPUs", description="that row's tensor-parallel size"
    ),
    Column(
        name="closest_target_quant", kind="str", unit="", description="that row's target precision"
    ),
    Column(name="closest_draft", kind="str", unit="", description="that row's draft"),
    Column(
        name="closest_draft_quant", kind="str", unit="", description="that row's draft precision"
    ),
    Column(name="closest_kv_dtype", kind="str", unit="", description="that row's KV cache dtype"),
    Column(
        name="closest_context_length", kind="int", unit="tokens", description="that row's context"
    ),
    Column(name="closest_batch_size", kind="int", unit="sequences", description="that row's batch"),
)
BY_NAME = {c.name: c for c in COVERAGE_COLUMNS} | {c.name: c for c in COLUMNS}


def table_columns(with_rank: bool) -> tuple[Column, ...]:
    """The frontier's columns, or best_pairs' (with its rank)."""
    return tuple(c for c in COLUMNS if with_rank or c.name != "rank")
