"""`infersize capacity` against public serving measurements (tests/data/serving_measurements.csv,
one measured figure a row, each with its source and the quoted figure): every row is turned into
the `capacity` question it answers (its deployment under its engine's settings, its benchmark
client's lengths and load, its speculative method at its K) and served by the simulator, the
path the command takes. Used by benchmarks/serving_calibration.py (the docs' tables), its test
and benchmarks/fit_serving_constants.py.

Each row is marked `split` by the rule of docs/calibration.md, per set of serving constants
(SERVING_FIT_GROUPS): whole sources, the largest first, until they hold half of the set's rows
are `fit`; every other row is `check`, never fitted to.

Lengths: a row's `lengths` says how its benchmark client drew them. Empty: every request the
row's mean lengths. `sglang-random`: SGLang's bench_serving random dataset at its defaults
(`--random-range-ratio 0`, `--seed 1`), whose lengths are numpy's legacy generator seeded with
1 drawing the prompts' lengths uniformly from 1 to the input length, then the answers' from 1 to
the output length (sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c:
python/sglang/bench_serving.py, `sample_random_requests` and `run_benchmark`); the totals these
draws give equal the totals the benchmarks log (6,101 input tokens for 10 prompts of up to 1,000,
39,668 for 80, 249,831 for 500), so each request is served at its own lengths, in order.
`vllm-random:R`: `vllm bench serve`'s random dataset at `--random-range-ratio R`, whose prompts
and answers are drawn uniformly from the integers in [floor(L·(1 − R)), ceil(L·(1 + R))] about
the row's lengths L (vllm-project/vllm@0056b87fc1fda2642f39dda4392824c425dd1638:
vllm/benchmarks/datasets.py, `RandomDataset.get_sampling_params`): drawn here from the same
distribution (numpy's generator seeded with the client's default seed, 0), not the client's
own draws.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from infersize.catalog.store import Catalog, load_catalog
from infersize.core.engines import EngineSettings
from infersize.core.serving.metrics import ServingMetrics
from infersize.record import record
from infersize.service.calibration import engine_settings, fit_sources, source_of
from infersize.service.capacity.arm import make_arm, serve
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest

Row = dict[str, str]
# the columns that say what was served: rows that share them share one simulation
SETUP = (
    "model",
    "precision",
    "kv_dtype",
    "gpu",
    "tp",
    "engine",
    "gpu_memory_utilization",
    "max_num_batched_tokens",
    "max_num_seqs",
    "input_tokens",
    "output_tokens",
    "lengths",
    "load_kind",
    "load",
    "requests",
    "draft",
    "draft_k",
    "acceptance_length",
)
KINDS = {  # kind: (metric, statistic, factor to the row's units); metric None: a throughput
    "ttft_mean_ms": ("ttft", "mean", 1e3),
    "ttft_p50_ms": ("ttft", "p50", 1e3),
    "ttft_p99_ms": ("ttft", "p99", 1e3),
    "tpot_mean_ms": ("tpot", "mean", 1e3),
    "tpot_p50_ms": ("tpot", "p50", 1e3),
    "tpot_p99_ms": ("tpot", "p99", 1e3),
    "itl_mean_ms": ("itl", "mean", 1e3),
    "e2e_mean_ms": ("e2e", "mean", 1e3),
    "output_tokens_per_s": (None, "output_tokens_per_s", 1.0),
    "requests_per_s": (None, "requests_per_s", 1.0),
    "tps_per_user": (None, "tps_per_user", 1.0),  # output tokens/s of one request: 1 / TPOT
}
SGLANG_RANDOM = "sglang-random"
VLLM_RANDOM = "vllm-random:"  # then the range ratio


def load_rows(path: Path) -> list[Row]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def sglang_random_lengths(
    input_len: int, output_len: int, prompts: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The lengths SGLang's bench_serving draws for its random dataset at its defaults (range
    ratio 0, seed 1): numpy's legacy generator seeded with 1, prompts from 1 to input_len,
    then answers from 1 to output_len, one each per prompt."""
    draws = np.random.RandomState(1)
    inputs = draws.randint(1, input_len + 1, size=prompts)
    outputs = draws.randint(1, output_len + 1, size=prompts)
    return tuple(int(x) for x in inputs), tuple(int(x) for x in outputs)


def vllm_random_lengths(
    input_len: int, output_len: int, prompts: int, ratio: float
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Lengths drawn as `vllm bench serve`'s random dataset draws them at range ratio `ratio`:
    uniform integers in [floor(L·(1 − ratio)), ceil(L·(1 + ratio))], prompts then answers
    (answers at least 1)."""
    draws = np.random.default_rng(0)
    bounds = [
        (math.floor(n * (1.0 - ratio)), math.ceil(n * (1.0 + ratio)))
        for n in (input_len, output_len)
    ]
    inputs = draws.integers(bounds[0][0], bounds[0][1] + 1, size=prompts)
    outputs = draws.integers(max(bounds[1][0], 1), max(bounds[1][1], 1) + 1, size=prompts)
    return tuple(int(x) for x in inputs), tuple(int(x) for x in outputs)


def is_length_draw(draw: str) -> bool:
    """Whether `draw` names a client's draw of lengths this module serves: sglang-random, or
    vllm-random:R with 0 <= R < 1 (vllm bench serve refuses a range ratio outside it)."""
    if draw == SGLANG_RANDOM:
        return True
    try:
        return draw.startswith(VLLM_RANDOM) and 0.0 <= float(draw[len(VLLM_RANDOM) :]) < 1.0
    except ValueError:
        return False


def traffic(row: Row) -> Traffic:
    """The row's requests as its benchmark client sent them."""
    inputs, outputs = int(row["input_tokens"]), int(row["output_tokens"])
    n = int(row["requests"])
    lengths: tuple[tuple[int, ...], tuple[int, ...]] = ((inputs,), (outputs,))
    drawn = row.get("lengths", "")
    if drawn == SGLANG_RANDOM:
        lengths = sglang_random_lengths(inputs, outputs, n)
    elif drawn.startswith(VLLM_RANDOM):
        lengths = vllm_random_lengths(inputs, outputs, n, float(drawn[len(VLLM_RANDOM) :]))
    closed = row["load_kind"] == "concurrency"
    return Traffic(
        input_tokens=lengths[0],
        output_tokens=lengths[1],
        concurrency=int(row["load"]) if closed else None,
        request_rate=None if closed else float(row["load"]),
        requests=n,
    )


def _settings(row: Row) -> EngineSettings:
    """The engine preset with the settings the row states (service/calibration.py's columns)."""
    return engine_settings(
        {
            key: row.get(key, "")
            for key in (
                "engine",
                "gpu_memory_utilization",
                "max_num_batched_tokens",
                "max_num_seqs",
            )
        }
    )


def capacity_request(row: Row) -> CapacityRequest:
    """The request `infersize capacity` builds for the row's deployment, drafter and load."""
    inputs, outputs = int(row["input_tokens"]), int(row["output_tokens"])
    method = row.get("draft") or None
    k = int(row["draft_k"]) if row.get("draft_k") else 1
    length = float(row["acceptance_length"]) if row.get("acceptance_length") else None
    deployment = DeploymentRequest(
        target=row["model"],
        gpu=row["gpu"],
        target_quant=row["precision"],
        kv_dtype=row["kv_dtype"],
        tp=int(row["tp"]),
        method=method,
    )
    spec = SpecRequest(
        deployment=deployment,
        context_length=inputs + outputs,
        engine=_settings(row),
        draft_k=k,
        max_k=max(k, 5),
        acceptance_length=length,
    )
    return CapacityRequest(spec=spec, traffic=traffic(row))


def simulate_row(row: Row, catalog: Catalog) -> ServingMetrics:
    """The row's arm (plain decoding, or its method at its K) at the row's load."""
    request = capacity_request(row)
    k = int(row["draft_k"]) if row.get("draft") else 0
    arm = make_arm(prepare_capacity(request, catalog), request.traffic, k)
    return serve(arm, request.traffic)


def value(measured: ServingMetrics, kind: str) -> float:
    metric, statistic, factor = KINDS[kind]
    if statistic == "tps_per_user":
        return 1.0 / measured.value("tpot", "mean")  # TensorRT-LLM's TPS/user
    if metric is None:
        return float(getattr(measured, statistic))
    return measured.value(metric, statistic) * factor


def predict(rows: Iterable[Row], catalog: Catalog | None = None) -> dict[str, float]:
    """Every row's prediction, by id (one simulation per setup)."""
    catalog = catalog or load_catalog()
    served: dict[tuple[str, ...], ServingMetrics] = {}
    predicted = {}
    for row in rows:
        key = tuple(row.get(column, "") for column in SETUP)
        if key not in served:
            served[key] = simulate_row(row, catalog)
        predicted[row["id"]] = value(served[key], row["kind"])
    return predicted


def error(row: Row, predicted: float) -> float:
    """Relative error of the prediction: predicted / measured - 1."""
    return predicted / float(row["measured"]) - 1.0


@record(kw_only=False)
class ServingGroup:
    """The rows one set of serving constants is fitted to: an engine's rows of some kinds."""

    name: str
    engines: tuple[str, ...]
    kinds: tuple[str, ...]
    moe: bool | None = None  # MoE targets only (True), dense only (False), either (None)
    indexer: bool | None = None  # targets with a lightning indexer only (True), without (False)
    linear: bool | None = None  # targets with linear-attention layers only (True), without (False)
    architecture: str | None = None  # targets of this architecture only (None: any)
    one_client: bool = False  # rows of one request at a time only: a step's fixed costs laid bare


def group_rows(group: ServingGroup, rows: list[Row], catalog: Catalog) -> list[Row]:
    """The group's rows: bounded, plain decoding (speculative rows check, never fit)."""
    out = []
    for r in rows:
        if r["engine"] not in group.engines or r["kind"] not in group.kinds:
            continue
        if r["bounded"] != "yes" or r.get("draft"):
            continue
        if group.one_client and (r["load_kind"], r["load"]) != ("concurrency", "1"):
            continue
        model = catalog.model(r["model"])
        if group.architecture not in (None, model.architecture):
            continue
        has = (
            model.moe is not None,
            model.index_n_heads is not None,
            model.linear_attention_layers > 0,
        )
        wants = (group.moe, group.indexer, group.linear)
        if all(want in (None, value) for want, value in zip(wants, has, strict=True)):
            out.append(r)
    return out


def expected_splits(
    rows: list[Row], groups: Iterable[ServingGroup], catalog: Catalog
) -> dict[str, str]:
    """Each row's split under the rule: `fit` for every row of a source some group is fitted
    to, `check` for the rest, so that no source is in both."""
    chosen: set[str] = set()
    for group in groups:
        chosen |= fit_sources(group_rows(group, rows, catalog))
    return {row["id"]: "fit" if source_of(row) in chosen else "check" for row in rows}


# The sets of serving constants and the rows each is fitted to (benchmarks/
# fit_serving_constants.py): the fixed costs of MoE and MLA layers and of passes outside CUDA
# graphs, on SGLang's serving rows; a lightning indexer's and a linear-attention layer's, on
# SGLang's rows of the models that have one; gpt-oss's own MoE layer cost (its architecture has
# no page among the first group's fit sources), on SGLang's rows of it decoding one request at a
# time; the compute share's curve over a pass's tokens, on TensorRT-LLM's maximum-throughput rows
SERVING_KINDS = ("tpot_mean_ms", "ttft_p50_ms", "output_tokens_per_s")
DECODE_KINDS = ("tpot_mean_ms", "output_tokens_per_s", "tps_per_user")
SGLANGS = ("sglang", "sglang-0.5.9")
SERVING_FIT_GROUPS = (
    ServingGroup("layer costs", ("sglang",), SERVING_KINDS, indexer=False, linear=False),
    ServingGroup("indexer layers", SGLANGS, SERVING_KINDS, indexer=True),
    ServingGroup("linear-attention layers", SGLANGS, SERVING_KINDS, linear=True),
    ServingGroup(
        "gpt-oss MoE layers", SGLANGS, DECODE_KINDS, architecture="gpt_oss", one_client=True
    ),
    ServingGroup("compute share", ("trtllm",), ("output_tokens_per_s",)),
)
