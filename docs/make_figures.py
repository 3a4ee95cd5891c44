"""Render the figures the README and docs show, into docs/figures/ (PNG), from the fleet,
methods and capacity sweeps and the catalogs: `python docs/make_figures.py`.
tests/test_figures_overlap.py renders the same figures and fails when any two texts overlap or a
text leaves the figure."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLEET_SLICE = ["--context-length", "8192", "--batch-size", "1"]
# the README's worked example of `infersize capacity`
CAPACITY_EXAMPLE = [
    "capacity",
    "--target",
    "llama-3.1-70b",
    "--target-quant",
    "fp8",
    "--draft",
    "llama-3.2-1b",
    "--gpu",
    "h100",
    "--tp",
    "2",
    "--engine",
    "vllm",
    "--input-tokens",
    "1024",
    "--output-tokens",
    "256",
    "--request-rate",
    "2",
    "--sla",
    "ttft:p99<=2000ms;tpot:p99<=50ms",
    "--target-request-rate",
    "20",
    "--draft-k",
    "auto",
]


# the README's worked example of `infersize schedule`
SCHEDULE_EXAMPLE = [
    "schedule",
    "--target",
    "llama-3.1-70b",
    "--target-quant",
    "fp8",
    "--draft",
    "llama-3.2-1b",
    "--gpu",
    "h100",
    "--tp",
    "2",
    "--engine",
    "trtllm",
    "--input-tokens",
    "768",
    "--output-tokens",
    "512",
]


# the README's fleet figure: sweeps/capacity.yaml's chat workload at its interactive SLA
CAPACITY_SWEEP = ROOT / "sweeps" / "capacity.yaml"
FLEET_CAPACITY = ["--sla", "interactive", "--workload", "chat", "--max-rate", "120"]


def figure_commands(sweep_out: Path, out_dir: Path) -> Iterator[tuple[str, list[str]]]:
    """(file name, infersize arguments) of every figure."""
    yield (
        "speedup_vs_k.png",
        [
            "plot",
            "k",
            "--alpha",
            "0.6",
            "--alpha",
            "0.75",
            "--alpha",
            "0.9",
            "--latency-ratio",
            "12",
            "--out",
            str(out_dir / "speedup_vs_k.png"),
        ],
    )
    yield (
        "speedup_vs_batch.png",
        [
            "plot",
            "batch",
            "--target",
            "llama-3.1-70b",
            "--target-quant",
            "fp8",
            "--draft",
            "llama-3.2-1b",
            "--gpu",
            "h100",
            "--tp",
            "2",
            "--context-length",
            "32768",
            "--out",
            str(out_dir / "speedup_vs_batch.png"),
        ],
    )
    yield (
        "frontier_h100.png",
        [
            "plot",
            "frontier",
            str(sweep_out),
            "--gpu",
            "h100",
            *FLEET_SLICE,
            "--out",
            str(out_dir / "frontier_h100.png"),
        ],
    )
    yield (
        "methods_h100.png",
        [
            "plot",
            "methods",
            str(sweep_out.parent / "methods"),
            "--gpu",
            "h100",
            "--target",
            "llama-3.3-70b",
            "--out",
            str(out_dir / "methods_h100.png"),
        ],
    )
    yield (
        "spec_k_curve.png",
        [
            "spec",
            "--target",
            "qwen2.5-7b",
            "--draft",
            "qwen2.5-0.5b",
            "--gpu",
            "a100",
            "--plot",
            str(out_dir / "spec_k_curve.png"),
        ],
    )
    yield (
        "capacity_70b_h100.png",
        [*CAPACITY_EXAMPLE, "--plot", str(out_dir / "capacity_70b_h100.png")],
    )
    yield (
        "schedule_70b_h100.png",
        [*SCHEDULE_EXAMPLE, "--plot", str(out_dir / "schedule_70b_h100.png")],
    )
    yield (
        "fleet_capacity.png",
        [
            "plot",
            "capacity",
            str(sweep_out.parent / "capacity"),
            *FLEET_CAPACITY,
            "--out",
            str(out_dir / "fleet_capacity.png"),
        ],
    )


def render(out_dir: Path, sweep_file: Path, capacity_file: Path = CAPACITY_SWEEP) -> list[Path]:
    from typer.testing import CliRunner

    from infersize.cli import app

    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        sweep_out = Path(tmp) / "fleet"
        result = runner.invoke(
            app, ["sweep", "run", str(sweep_file), "--out", str(sweep_out), "-q"]
        )
        if result.exit_code:
            raise SystemExit(result.output)
        for name, path in (
            ("methods", ROOT / "sweeps" / "methods.yaml"),
            ("capacity", capacity_file),
        ):
            run = ["sweep", "run", str(path), "--out", str(sweep_out.parent / name), "-q"]
            result = runner.invoke(app, run)
            if result.exit_code:
                raise SystemExit(result.output)
        made = []
        for name, args in figure_commands(sweep_out, out_dir):
            result = runner.invoke(app, args)
            if result.exit_code:
                raise SystemExit(f"{name}: {result.output}")
            made.append(out_dir / name)
        return made


if __name__ == "__main__":
    sweep = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "sweeps" / "fleet.yaml"
    for path in render(ROOT / "docs" / "figures", sweep):
        print(path.relative_to(ROOT))
