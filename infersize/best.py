"""`infersize best`: the best draft pair per GPU (and target), read back from a sweep's tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infersize.errors import InfersizeError, UnknownNameError

COLUMNS = ["gpu", "target", "draft", "K", "speedup", "tokens/s", "tok/s/GPU", "GiB", "$/Mtok"]


def display_rows(frame) -> list[list[str]]:
    """Compact rows for the terminal: precision and TP folded into the model columns."""
    rows = []
    for r in frame.to_dicts():
        tp = f" tp{r['tp']}" if r["tp"] > 1 else ""
        usd = "-" if r["usd_per_mtok"] is None else f"{r['usd_per_mtok']:.3f}"
        rows.append(
            [
                r["gpu"],
                f"{r['target']} {r['target_quant']}{tp}",
                f"{r['draft']} {r['draft_quant']}",
                str(r["optimal_k"]),
                f"{r['speedup']:.2f}x",
                f"{r['tokens_per_s']:,.0f}",
                f"{r['tokens_per_s_per_gpu']:,.0f}",
                f"{r['combined_gib']:.1f}",
                usd,
            ]
        )
    return rows


def _nearest(values: list[float], wanted: float) -> float:
    return min(values, key=lambda v: (abs(v - wanted), v))


def best_pairs(
    out_dir: Path,
    gpu: str | None = None,
    target: str | None = None,
    alpha: float | None = None,
    context: int | None = None,
    batch: int | None = None,
    rank: int = 1,
) -> tuple[Any, dict[str, Any]]:
    """Rows of best_pairs at one (context, batch, α) and the selection used. Defaults: the
    smallest context and batch of the sweep, and the α nearest 0.7 (a typical acceptance rate)."""
    import polars as pl

    path = out_dir / "best_pairs.parquet"
    if not path.is_file():
        raise InfersizeError(
            f"{out_dir}: no best_pairs.parquet there; run 'infersize sweep run' first"
        )
    frame = pl.read_parquet(path)
    for column, value in (("gpu", gpu), ("target", target)):
        if value is not None:
            frame = _match(frame, column, _catalog_id(column, value))
    if frame.is_empty():
        return frame, {}
    chosen = {
        "context_length": context if context is not None else frame["context_length"].min(),
        "batch_size": batch if batch is not None else frame["batch_size"].min(),
        "acceptance_rate": _nearest(
            sorted(frame["acceptance_rate"].unique()), 0.7 if alpha is None else alpha
        ),
    }
    for column, value, flag in (
        ("context_length", context, "--context-length"),
        ("batch_size", batch, "--batch-size"),
    ):
        swept = sorted(frame[column].unique())
        if value is not None and value not in swept:
            raise InfersizeError(
                f"{flag} {value} is not in the sweep; it has {', '.join(str(v) for v in swept)}"
            )
    if alpha is not None and abs(chosen["acceptance_rate"] - alpha) > 1e-9:
        raise InfersizeError(
            f"α {alpha:g} is not in the sweep; nearest is {chosen['acceptance_rate']:g}"
        )
    for column, value in chosen.items():
        frame = frame.filter(pl.col(column) == value)
    frame = frame.filter(pl.col("rank") <= rank).sort(["gpu", "target", "rank"])
    return frame, chosen


def _catalog_id(column: str, value: str) -> str:
    """A catalog alias ('h100', 'Qwen/Qwen2.5-7B') becomes the id the tables hold."""
    from infersize.catalog import load_catalog

    catalog = load_catalog()
    try:
        return (catalog.gpu if column == "gpu" else catalog.model)(value).id
    except InfersizeError:
        return value


def _match(frame, column: str, value: str):
    import polars as pl

    known = sorted(frame[column].unique().to_list())
    lowered = {k.lower(): k for k in known}
    if value.lower() not in lowered:
        raise UnknownNameError(column, value, known, hint=f"in this sweep: {', '.join(known)}")
    return frame.filter(pl.col(column) == lowered[value.lower()])
