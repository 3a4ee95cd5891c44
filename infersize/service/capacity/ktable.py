"""The K schedule `capacity --k-schedule` serves with, as (first batch, last batch, K) ranges
from batch 1: `auto`, the table `infersize schedule` prices for the deployment, or a file in
any form the engines or `schedule` write it:

- vLLM's speculative_config (JSON, as `schedule --out` writes it, bare or under
  `speculative_config`): num_speculative_tokens_per_batch_size, inclusive [start, end, K] ranges
  from 1, a gap and the batches past the last inheriting the K before them, each K clamped to
  num_speculative_tokens; null: num_speculative_tokens at every batch
  (vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d:
  vllm/v1/spec_decode/dynamic/utils.py);
- TensorRT-LLM's LLM-API options (YAML): speculative_config.draft_len_schedule, each key an
  inclusive upper batch bound (the first key at or above the batch applies; past the largest,
  0), null: max_draft_len at every batch
  (NVIDIA/TensorRT-LLM@011d0933dcb5e592f5fa2626beaf42a96324c578:
  tensorrt_llm/_torch/speculative/utils.py);
- `infersize schedule --json`: its buckets' min_batch, max_batch and draft_k.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

from infersize.catalog.yamlfile import read_yaml
from infersize.errors import InfersizeError

Ranges = tuple[tuple[int, int, int], ...]  # inclusive (first batch, last batch, K)
BEYOND = 1 << 30  # the last range runs on past every batch an engine runs


class KScheduleFileError(InfersizeError):
    """A --k-schedule file that holds no table an engine or `schedule` writes."""


def _count(path: Path, value: Any, what: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise KScheduleFileError(f"{path}: {what} must be a whole number of at least {low}")
    return value


def _vllm(path: Path, spec: dict[str, Any]) -> Ranges:
    largest = _count(path, spec.get("num_speculative_tokens"), "num_speculative_tokens", 1)
    table = spec.get("num_speculative_tokens_per_batch_size")
    if table is None:
        return ((1, BEYOND, largest),)
    rows = []
    for row in table if isinstance(table, list) else [None]:
        if not isinstance(row, list) or len(row) != 3:
            raise KScheduleFileError(
                f"{path}: num_speculative_tokens_per_batch_size holds [start, end, K] ranges"
            )
        rows.append(tuple(_count(path, v, "each start, end and K") for v in row))
    if rows[0][0] != 1 or any(
        b[0] <= a[1] or r[0] > r[1] for a, b in pairwise(rows) for r in (a, b)
    ):
        raise KScheduleFileError(
            f"{path}: num_speculative_tokens_per_batch_size must start at 1, sorted, without "
            "overlaps"
        )
    stops = [r[0] - 1 for r in rows[1:]] + [BEYOND]  # a gap inherits the K before it
    return tuple((r[0], stop, min(r[2], largest)) for r, stop in zip(rows, stops, strict=True))


def _trtllm(path: Path, spec: dict[str, Any]) -> Ranges:
    largest = _count(path, spec.get("max_draft_len"), "max_draft_len", 1)
    table = spec.get("draft_len_schedule")
    if table is None:
        return ((1, BEYOND, largest),)
    if not isinstance(table, dict) or not table:
        raise KScheduleFileError(f"{path}: draft_len_schedule maps batch sizes to draft lengths")
    bounds = sorted(
        (_count(path, b, "each batch bound", 1), _count(path, k, "each K"))
        for b, k in table.items()
    )
    ranges, first = [], 1
    for bound, k in bounds:
        ranges.append((first, bound, min(k, largest)))
        first = bound + 1
    return (*ranges, (first, BEYOND, 0))  # past the largest key, no drafts


def _buckets(path: Path, buckets: Any) -> Ranges:
    if not isinstance(buckets, list) or not buckets:
        raise KScheduleFileError(f"{path}: buckets must list the ranges")
    try:
        rows = [(int(b["min_batch"]), int(b["max_batch"]), int(b["draft_k"])) for b in buckets]
    except (KeyError, TypeError, ValueError):
        raise KScheduleFileError(
            f"{path}: each bucket needs min_batch, max_batch and draft_k"
        ) from None
    return (*rows[:-1], (rows[-1][0], BEYOND, rows[-1][2]))


def read_k_schedule(path: Path) -> Ranges:
    """The ranges of a schedule file (any of the module's forms)."""
    data = read_yaml(path, KScheduleFileError).data
    if not isinstance(data, dict):
        raise KScheduleFileError(f"{path}: not a K schedule (a JSON or YAML object)")
    if "buckets" in data:
        return _buckets(path, data["buckets"])
    spec = data.get("speculative_config", data)
    if isinstance(spec, dict) and "num_speculative_tokens" in spec:
        return _vllm(path, spec)
    if isinstance(spec, dict) and "max_draft_len" in spec:
        return _trtllm(path, spec)
    raise KScheduleFileError(
        f"{path}: holds no K schedule: vLLM's speculative_config, TensorRT-LLM's "
        "speculative_config or the JSON of {schedule}",
        commands=("schedule",),
    )


def table_text(ranges: Ranges) -> str:
    """'K 3 at 1-27, K 2 from 28' for notes and panels."""
    parts = [
        f"K {k} " + (f"from {first:,}" if last >= BEYOND else f"at {first:,}-{last:,}")
        for first, last, k in ranges
    ]
    return ", ".join(parts)
