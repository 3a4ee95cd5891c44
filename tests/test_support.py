"""Kernel support (configs/support.yaml): a precision the GPU cannot run is never "safe" and
never ranked; weight-only cells are labelled and priced at the 16-bit peak."""

from __future__ import annotations

import json
import typing

import polars as pl
import pytest

from infersize.catalog.records import Architecture
from infersize.catalog.store import load_catalog
from infersize.cli import app
from infersize.core.latency import WEIGHT_ONLY_COMPUTE_EFFICIENCY
from infersize.service.resolve import resolve_side
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import run_sweep

CATALOG = load_catalog()
ARCHITECTURES = typing.get_args(Architecture)
SWEEP = """\
targets: [llama-3.1-8b, qwen2.5-14b]
drafts: [llama-3.2-1b, qwen2.5-0.5b]
target_quants: [fp8, nvfp4, mxfp4, int4]
draft_quants: [bf16, int4]
gpus: [a100, l40s, h100, b200, mi300x]
context_lengths: [4096]
batch_sizes: [1, 32]
acceptance_rates: [0.7]
draft_k: {start: 1, stop: 6, step: 1}
"""


@pytest.mark.parametrize("family", ["vllm", "llama.cpp"])
def test_every_precision_has_a_rule_on_every_architecture(family):
    for precision in CATALOG.weight_formats.records:
        groups = CATALOG.support_rules[family][precision]
        covered = [arch for group in groups for arch in group.archs]
        assert sorted(covered) == sorted(ARCHITECTURES), (family, precision)
        for group in groups:
            assert group.sources and all(s in SOURCES for s in group.sources), group


SOURCES = __import__("yaml").safe_load(
    (__import__("pathlib").Path(__file__).parent.parent / "configs" / "support.yaml").read_text()
)["support_sources"]


def test_every_gpu_has_an_architecture():
    assert all(gpu.architecture in ARCHITECTURES for gpu in CATALOG.gpus.records.values())


@pytest.fixture(scope="module")
def support_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("support")
    (tmp / "s.yaml").write_text(SWEEP)
    config, doc = load_sweep(tmp / "s.yaml")
    plan = build_plan(config, doc)
    run_sweep(plan, tmp / "out")
    return plan, tmp / "out"


def expected(quant: str, gpu: str) -> str:
    return CATALOG.support(quant, CATALOG.gpu(gpu), "vllm").level


def test_no_unsupported_cell_is_scored_or_ranked(support_run):
    plan, out = support_run
    # vLLM runs NVFP4 on AMD only through its emulation kernel: never planned, counted instead
    assert plan.skipped["settings with a precision the GPU cannot run"] > 0
    assert not [s for s in plan.settings if s.gpu == "mi300x" and s.target_quant == "nvfp4"]
    for table in ("best_pairs", "frontier"):
        frame = pl.read_parquet(out / f"{table}.parquet")
        assert set(frame["support"].unique()) <= {"native", "weight-only"}
        assert frame.filter(
            (pl.col("gpu") == "mi300x") & (pl.col("target_quant") == "nvfp4")
        ).is_empty()
        for row in (
            frame.select("gpu", "target_quant", "draft_quant", "support").unique().iter_rows()
        ):
            gpu, t_q, d_q, support = row
            levels = {expected(t_q, gpu), expected(d_q, gpu)}
            assert support == ("weight-only" if "weight-only" in levels else "native"), row


def test_weight_only_cells_are_labelled(support_run):
    plan, out = support_run

    def label(gpu, quant):
        return {
            s.support
            for s in plan.settings
            if s.gpu == gpu and s.target_quant == quant and s.draft_quant == "bf16"
        }

    assert label("a100-80gb-sxm", "fp8") == {"weight-only"}  # FP8 Marlin on Ampere
    assert label("h100-sxm", "fp8") == {"native"}
    assert label("h100-sxm", "nvfp4") == {"weight-only"}  # NVFP4 Marlin before Blackwell
    assert label("b200", "nvfp4") == {"native"}
    assert label("l40s", "int4") == {"weight-only"}  # W4A16 is weight-only by construction
    best = pl.read_parquet(out / "best_pairs.parquet")
    assert set(best.filter(pl.col("gpu") == "h100-sxm")["support"]) == {"native", "weight-only"}


def test_weight_only_multiplies_at_the_16_bit_peak():
    gpu, kv = CATALOG.gpu("h100"), CATALOG.kv_dtype("fp16")
    side, support = resolve_side("llama-3.1-8b", "nvfp4", CATALOG, kv, gpu)
    assert support.level == "weight-only"
    # H100 has FP8 but no FP4 tensor cores: dequantised NVFP4 multiplies at the BF16 peak
    assert side.numbers.cost.peak_flops == pytest.approx(989.4e12 * WEIGHT_ONLY_COMPUTE_EFFICIENCY)
    native, _ = resolve_side("llama-3.1-8b", "fp8", CATALOG, kv, gpu)
    assert native.numbers.cost.peak_flops == gpu.fp8_tflops * 1e12  # 1979 (gpus.yaml)


@pytest.mark.parametrize(
    ("quant", "gpu", "verdict", "support"),
    [
        ("nvfp4", "mi300x", "unsupported", "unsupported"),
        ("fp8", "t4", "safe", "weight-only"),
        ("int8", "b200", "unsupported", "unsupported"),  # vLLM: no INT8 kernels on SM100
        ("fp8", "h100", "safe", "native"),
    ],
)
def test_spec_says_what_the_gpu_can_run(runner, quant, gpu, verdict, support):
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            "llama-3.1-8b",
            "--target-quant",
            quant,
            "--draft",
            "llama-3.2-1b",
            "--draft-quant",
            "fp16",
            "--gpu",
            gpu,
            "--context-length",
            "2048",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["verdict"], data["support"]) == (verdict, support)
    if support == "unsupported":
        assert data["fits"] is False and data["speedup"] is None and data["usd_per_mtok"] is None
        assert data["support_reason"].startswith(f"target {quant}: ")
    if support == "weight-only":
        assert "Marlin" in data["support_reason"]


def test_auto_precision_falls_back_to_fp16_where_bf16_cannot_run(runner):
    result = runner.invoke(
        app,
        ["spec", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gpu", "t4", "--json"],
    )
    data = json.loads(result.stdout)
    assert data["target"]["quant"] == "fp16" and data["draft"]["quant"] == "fp16"
    assert data["support"] == "native"
