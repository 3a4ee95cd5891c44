"""infersize's prediction for each published measurement of tests/data/measurements.csv: each
row is turned into the `infersize spec` question it answers (a `SpecRequest`) and predicted by
`run_spec`, the function `spec` runs, so the calibration checks the path users run. Used by
the calibration test, the docs' calibration table and benchmarks/fit_engine_constants.py.

Each row is marked `split`: `fit` rows are the ones benchmarks/fit_engine_constants.py fits the
engine presets' constants to; `check` rows are never fitted to, so their errors are out of
sample. The rule that assigns them is stated in docs/calibration.md and held by the tests.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infersize.catalog.store import Catalog, load_catalog
from infersize.core.engines import ENGINES, Engine, EngineSettings, register_engine
from infersize.core.memory import GIB
from infersize.core.speculative import alpha_from_vllm_acceptance_rate
from infersize.defaults import DEFAULTS
from infersize.record import record
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
from infersize.service.spec import run_spec
from infersize.service.spec_result import SpecResult

Row = dict[str, str]
VLLM_POOL_KINDS = ("kv_pool_gib", "vllm_kv_pool_tokens", "vllm_max_concurrency")
SGLANG_POOL_KINDS = ("sglang_max_total_num_tokens",)  # "KV Cache is allocated. #tokens: N"
TRTLLM_POOL_KINDS = ("trtllm_max_tokens",)  # "Allocated X GiB for max tokens in ... (N)"
POOL_KINDS = VLLM_POOL_KINDS + SGLANG_POOL_KINDS + TRTLLM_POOL_KINDS
SPLITS = ("fit", "check")
POOL_ALPHA = 0.5  # vLLM's pool does not depend on α; `spec` needs one for a draft all the same
# Theorem 3.8 rows give α, K and c = 1/γ only: with γ given, `spec` prices Leviathan's speedup
# from those three alone, whatever the deployment (any one that fits; this is the seed example)
THEOREM_DEPLOYMENT = DeploymentRequest(
    target="qwen2.5-7b", gpu="a100", target_quant="fp16", draft="qwen2.5-0.5b", draft_quant="int4"
)


def load_measurements(path: Path) -> list[Row]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@record(kw_only=False)
class FitGroup:
    """The bounded rows that one set of an engine preset's constants is fitted to."""

    engine: str
    kinds: tuple[str, ...]
    batch_one: bool  # batch-1 rows only: the preset's batch-16-64 rows are never fitted to


FIT_GROUPS = (
    FitGroup("plain", ("decode_tokens_per_s",), batch_one=False),
    FitGroup("vllm", ("decode_tokens_per_s",), batch_one=True),
    FitGroup("llama.cpp", ("decode_tokens_per_s",), batch_one=True),
    FitGroup("vllm", VLLM_POOL_KINDS, batch_one=False),
    FitGroup("vllm-0.15", VLLM_POOL_KINDS, batch_one=False),
    FitGroup("sglang-0.4", SGLANG_POOL_KINDS, batch_one=False),
    FitGroup("sglang", SGLANG_POOL_KINDS, batch_one=False),
)


def source_of(row: Row) -> str:
    """The publication a row comes from: its source's URL or repo@commit:path."""
    return row["source"].split(" ", 1)[0]


def group_rows(group: FitGroup, rows: list[Row]) -> list[Row]:
    return [
        r
        for r in rows
        if r["engine"] == group.engine
        and r["kind"] in group.kinds
        and r["bounded"] == "yes"
        and (not group.batch_one or r["batch_size"] == "1")
    ]


def fit_sources(rows: list[Row]) -> set[str]:
    """The split rule: whole sources, the largest first (ties: the one listed first), until
    they hold at least half of the group's rows. The other sources are never fitted to."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[source_of(row)] = counts.get(source_of(row), 0) + 1
    chosen: set[str] = set()
    for source in sorted(counts, key=lambda s: -counts[s]):  # stable: first listed first
        if 2 * sum(counts[s] for s in chosen) >= len(rows):
            break
        chosen.add(source)
    return chosen


def expected_splits(rows: list[Row]) -> dict[str, str]:
    """Each row's split under the rule: `fit` for every row of a source some group is fitted
    to, `check` for the rest, so that no source is in both."""
    chosen: set[str] = set()
    for group in FIT_GROUPS:
        chosen |= fit_sources(group_rows(group, rows))
    return {row["id"]: "fit" if source_of(row) in chosen else "check" for row in rows}


def _optional_int(text: str) -> int | None:
    return int(text) if text else None


def engine_settings(row: Row) -> EngineSettings:
    """The engine preset of a row with the settings its log states. The CSV names them as
    vLLM does; for SGLang and TensorRT-LLM the same three columns hold their counterparts:
    gpu_memory_utilization their memory fraction (mem_fraction_static,
    kv_cache_free_gpu_memory_fraction), max_num_batched_tokens their tokens per step
    (chunked_prefill_size, max_num_tokens), max_num_seqs their sequence limit
    (max_running_requests, max_batch_size)."""
    utilization = row.get("gpu_memory_utilization")
    fraction = float(utilization) if utilization else None
    tokens = _optional_int(row.get("max_num_batched_tokens", ""))
    seqs = _optional_int(row.get("max_num_seqs", ""))
    rule = ENGINES[row["engine"]].memory_rule
    if rule == "sglang":
        return EngineSettings(
            engine=row["engine"],
            mem_fraction_static=fraction,
            chunked_prefill_size=tokens,
            max_running_requests=seqs,
        )
    if rule == "trtllm":
        return EngineSettings(
            engine=row["engine"],
            kv_cache_free_gpu_memory_fraction=fraction,
            max_num_tokens=tokens,
            max_batch_size=seqs,
        )
    return EngineSettings(
        engine=row["engine"],
        gpu_memory_utilization=fraction,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        vllm_sampler=row.get("vllm_sampler") or None,
        vllm_entrypoint=row.get("vllm_entrypoint") or DEFAULTS.vllm_entrypoint,
    )


def _mean_context(row: Row) -> int:
    """The mean context over the generated tokens: the prompt and half the output."""
    return max(1, round(int(row["input_tokens"]) + int(row["output_tokens"]) / 2))


def spec_request(row: Row) -> SpecRequest:
    """The `infersize spec` question a measurement answers."""
    kind = row["kind"]
    if kind == "leviathan_expected":  # Theorem 3.8 at the paper's α, K and c
        return SpecRequest(
            deployment=THEOREM_DEPLOYMENT,
            acceptance_rate=float(row["alpha"]),
            draft_k=int(row["draft_k"]),
            latency_ratio=1.0 / float(row["cost_coefficient"]),
            speedup_model="leviathan",
        )
    deployment = DeploymentRequest(
        target=row["model"],
        gpu=row["gpu"],
        target_quant=row["precision"],
        draft=row.get("draft") or None,
        draft_quant=row.get("draft_precision") or "auto",
        kv_dtype=row.get("kv_dtype") or "fp16",
        tp=int(row["tp"]),
    )
    settings = engine_settings(row)
    if kind in POOL_KINDS:  # the pool a start-up log reports, at the log's context
        return SpecRequest(
            deployment=deployment,
            context_length=int(row["context_length"]),
            acceptance_rate=None if deployment.draft is None else POOL_ALPHA,
            engine=settings,
        )
    if kind == "speculative_speedup":  # accepted / drafted as logged, as α at the row's K
        k = int(row["draft_k"])
        return SpecRequest(
            deployment=deployment,
            context_length=_mean_context(row),
            batch_size=int(row["batch_size"]),
            acceptance_rate=float(alpha_from_vllm_acceptance_rate(float(row["alpha"]), k)),
            draft_k=k,
            speedup_model="roofline",
            engine=settings,
        )
    if kind == "decode_tokens_per_s":
        return SpecRequest(
            deployment=deployment,
            context_length=_mean_context(row),
            batch_size=int(row["batch_size"]),
            engine=settings,
        )
    raise ValueError(f"unknown measurement kind {kind!r}")


def _figure(kind: str, result: SpecResult) -> float | None:
    """The figure of the answer that a measurement of `kind` is compared with."""
    if kind == "kv_pool_gib":
        return None if result.kv_pool_bytes is None else result.kv_pool_bytes / GIB
    if kind == "vllm_kv_pool_tokens":
        return result.kv_pool_tokens
    if kind == "vllm_max_concurrency":
        return result.max_concurrent_sequences
    if kind in SGLANG_POOL_KINDS:
        return result.max_total_num_tokens
    if kind in TRTLLM_POOL_KINDS:
        return result.max_tokens_in_paged_kv_cache
    if kind == "decode_tokens_per_s":
        return result.baseline_tokens_per_s
    return result.speedup  # leviathan_expected, speculative_speedup


def predict(row: Row, catalog: Catalog | None = None) -> float:
    """What `infersize spec` answers to the row's question (under the engine presets now
    registered: benchmarks/fit_engine_constants.py registers its candidates with
    `engine_preset`)."""
    result = run_spec(spec_request(row), catalog or load_catalog())
    figure = _figure(row["kind"], result)
    if figure is None:
        raise ValueError(f"{row['id']}: spec gives no {row['kind']} (it does not fit)")
    return float(figure)


@contextmanager
def engine_preset(engine: Engine) -> Iterator[None]:
    """`engine` registered in place of the preset of its name while the block runs."""
    previous = ENGINES.get(engine.name)
    register_engine(engine)
    try:
        yield
    finally:
        if previous is None:
            del ENGINES[engine.name]
        else:
            register_engine(previous)


def error(row: Row, predicted: float) -> float:
    """Relative error, or absolute for the dimensionless Leviathan rows."""
    measured = float(row["measured"])
    if row["kind"] == "leviathan_expected":
        return predicted - measured
    return predicted / measured - 1.0


def _setup(row: Row) -> str:
    if row["kind"] == "leviathan_expected":
        return f"α {row['alpha']}, K {row['draft_k']}, c {row['cost_coefficient']}"
    text = f"{row['model']} {row['precision']}"
    if row.get("draft"):
        text += f" + {row['draft']}"
    text += f", {row['gpu']} ×{row['tp']}, {row['engine']}"
    if row["kind"] in POOL_KINDS:
        return f"{text}, context {int(row['context_length']):,}"
    if row["kind"] == "speculative_speedup":
        return f"{text}, K {row['draft_k']}, accepted {row['alpha']}"
    return f"{text}, batch {row['batch_size']}"


def _error_text(row: Row, err: float) -> str:
    return f"{err:+.3f}" if row["kind"] == "leviathan_expected" else f"{err * 100:+.1f}%"


def _bound_text(row: Row) -> str:
    if row["kind"] == "leviathan_expected":
        return f"±{row['tolerance']}"
    return f"±{float(row['tolerance']) * 100:.0f}%" if row["bounded"] == "yes" else "n/a"


def calibration_table(rows: list[Row]) -> str:
    """The Markdown table of docs/calibration.md: every row, its split, prediction and error."""
    catalog = load_catalog()
    lines = [
        "| measurement | split | what | setup | measured | predicted | error | bound |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        predicted = predict(row, catalog)
        unit = "" if row["units"] in ("x", "tokens") else f" {row['units']}"
        digits = 0 if row["units"] == "tokens" else 2
        lines.append(
            f"| {row['id']} | {row['split']} | {row['kind']} | {_setup(row)} | "
            f"{float(row['measured']):,.{digits}f}{unit} | {predicted:,.{digits}f} | "
            f"{_error_text(row, error(row, predicted))} | {_bound_text(row)} |"
        )
    return "\n".join(lines) + "\n"


def _describe(group: FitGroup) -> str:
    figures = {
        ("decode_tokens_per_s",): "decode tokens/s",
        VLLM_POOL_KINDS: "vLLM KV pool",
        SGLANG_POOL_KINDS: "SGLang KV pool",
    }
    figure = figures[group.kinds]
    batch = ", batch 1" if group.batch_one else ""
    return f"`{group.engine}` {figure}{batch}"


def _errors_text(rows: list[Row], errors: list[float]) -> str:
    if not rows:
        return "— | —"
    i = max(range(len(rows)), key=lambda j: abs(errors[j]) / float(rows[j]["tolerance"]))
    mean = sum(abs(e) for e in errors) / len(errors)
    return f"{errors[i] * 100:+.1f}% ({rows[i]['id']}) | {mean * 100:.1f}%"


def split_table(rows: list[Row]) -> str:
    """In-sample beside out-of-sample errors for each set of fitted constants: the `fit` rows
    it is fitted to, and the bounded `check` rows of the same preset and figure."""
    catalog = load_catalog()
    lines = [
        "| constants | fit rows | in sample: worst (row) | mean \\|error\\| | check rows | "
        "out of sample: worst (row) | mean \\|error\\| |",
        "| --- | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for group in FIT_GROUPS:
        fitted = [r for r in group_rows(group, rows) if r["split"] == "fit"]
        checked = [
            r
            for r in rows
            if r["split"] == "check"
            and r["bounded"] == "yes"
            and r["engine"] == group.engine
            and r["kind"] in group.kinds
        ]
        text = [
            _errors_text(part, [error(r, predict(r, catalog)) for r in part])
            for part in (fitted, checked)
        ]
        lines.append(
            f"| {_describe(group)} | {len(fitted)} | {text[0]} | {len(checked)} | {text[1]} |"
        )
    return "\n".join(lines) + "\n"
