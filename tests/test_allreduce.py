"""Fused all-reduces (core/allreduce.py): which engine fuses them for which model on which GPU,
and what a pass then costs."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from infersize.cli import app
from infersize.core.allreduce import (
    FUSED_ALLREDUCE_LATENCY_S,
    SGLANG_056_FUSION,
    SGLANG_059_FUSION,
    TRTLLM_FUSION,
)
from infersize.core.engines import ENGINES
from infersize.core.latency import allreduce_latency_s, step_time_s
from infersize.service.resolve import resolve_side


def resolved(catalog, model, engine, gpu="b200", tp=8, dp_attention=False, target=None):
    side, _ = resolve_side(
        model,
        "auto",
        catalog,
        catalog.kv_dtype("bf16"),
        catalog.gpu(gpu),
        tp,
        ENGINES[engine].support_family,
        dp_attention,
        ENGINES[engine],
        target,
    )
    return side


@pytest.mark.parametrize(
    ("fusion", "target", "side", "gpu", "fused"),
    [
        # SGLang 0.5.6: DeepseekV3ForCausalLM (Kimi-K2's class too) and GptOssForCausalLM on sm100
        (SGLANG_056_FUSION, "deepseek_v3", "deepseek_v3", "blackwell", True),
        (SGLANG_056_FUSION, "kimi_k2", "kimi_k2", "blackwell", True),
        (SGLANG_056_FUSION, "gpt_oss", "gpt_oss", "blackwell", True),
        (SGLANG_056_FUSION, "gpt_oss", "gpt_oss", "hopper", False),
        (SGLANG_056_FUSION, "qwen3_moe", "qwen3_moe", "blackwell", False),
        (SGLANG_056_FUSION, "deepseek_v32", "deepseek_v32", "blackwell", False),  # DP attention
        # the MTP layer runs under its target's flag; a Llama draft's layers take no fusion
        (SGLANG_056_FUSION, "deepseek_v3", "deepseek_mtp", "blackwell", True),
        (SGLANG_056_FUSION, "deepseek_v3", "llama", "blackwell", False),
        (SGLANG_056_FUSION, "llama", "deepseek_mtp", "blackwell", False),
        # SGLang 0.5.9: Qwen3-MoE and GLM-4.5/4.6 too, on Hopper as well
        (SGLANG_059_FUSION, "qwen3_moe", "qwen3_moe", "hopper", True),
        (SGLANG_059_FUSION, "glm4_moe", "glm4_moe", "blackwell", True),
        (SGLANG_059_FUSION, "qwen3_5_moe", "qwen3_5_moe", "hopper", False),
        (SGLANG_059_FUSION, "qwen3_moe", "qwen3_moe", "ampere", False),
        (TRTLLM_FUSION, "deepseek_v3", "deepseek_v3", "blackwell", True),
        (TRTLLM_FUSION, "gpt_oss", "gpt_oss", "blackwell", False),
    ],
)
def test_which_architectures_fuse_on_which_gpus(fusion, target, side, gpu, fused):
    assert fusion.fuses(target, side, gpu) is fused


def test_a_fused_all_reduce_costs_the_measured_kernel_up_to_the_workspace():
    """8.7 us (sgl-project/sglang PR 7621, 8 x B200) where fused and within 2,048 tokens, the
    engine's unfused latency elsewhere."""
    tokens = np.array([1.0, 2048.0, 2049.0, 1.0])
    fused = np.array([1.0, 1.0, 1.0, 0.0])
    got = allreduce_latency_s(2.5e-5, SGLANG_056_FUSION, fused, tokens)
    assert got.tolist() == [FUSED_ALLREDUCE_LATENCY_S, FUSED_ALLREDUCE_LATENCY_S, 2.5e-5, 2.5e-5]
    assert allreduce_latency_s(2.5e-5, None, fused, tokens).tolist() == [2.5e-5] * 4


def test_gpt_oss_on_8_b200_under_sglang_saves_the_fused_latency_on_every_all_reduce(catalog):
    """A decode pass of gpt-oss-120b (36 layers, two all-reduces each) at TP 8 on B200: SGLang
    0.5.6 fuses, vLLM does not; the passes differ by 2 · 36 · (25 - 8.7) us = 1.1736 ms, the
    rest of the pass (weights, launches) being priced alike (the same layer costs: SGLang's
    own MoE cost for gpt-oss on both, where vLLM's side carries the pooled one)."""
    sglang, vllm = ENGINES["sglang"], ENGINES["vllm"]
    fused = resolved(catalog, "gpt-oss-120b", "sglang")
    plain = resolved(catalog, "gpt-oss-120b", "vllm")
    assert float(fused.numbers.cost.fused_allreduce) == 1.0
    assert float(plain.numbers.cost.fused_allreduce) == 0.0
    # price both passes under SGLang's constants, the fusion read from each side's cost
    t_fused = float(step_time_s(fused.numbers.cost, sglang, 1, 1, 1024))
    unfused = replace(plain.numbers.cost, moe_layer_s=fused.numbers.cost.moe_layer_s)
    t_plain = float(step_time_s(unfused, sglang, 1, 1, 1024))
    saved = 2 * 36 * (sglang.allreduce_latency_s - FUSED_ALLREDUCE_LATENCY_S)
    assert t_plain - t_fused == pytest.approx(saved, rel=1e-9)
    assert vllm.allreduce_fusion is None


def test_no_fusion_without_tensor_parallel_or_with_dp_attention_or_off_blackwell(catalog):
    for kwargs in ({"tp": 1, "gpu": "b200"}, {"dp_attention": True}, {"gpu": "h200"}):
        side = resolved(catalog, "gpt-oss-120b", "sglang", **kwargs)
        assert float(side.numbers.cost.fused_allreduce) == 0.0, kwargs


def test_a_drafter_fuses_under_its_targets_flag(catalog):
    """DeepSeek-V3's MTP layer fuses beside its target under SGLang on B200 (the server's flag,
    and a DeepSeek decoder layer); a Llama draft's layers take no fusion."""
    mtp = resolved(catalog, "deepseek-v3-mtp", "sglang", target="deepseek_v3")
    llama = resolved(catalog, "llama-3.2-1b", "sglang", target="deepseek_v3")
    assert float(mtp.numbers.cost.fused_allreduce) == 1.0
    assert float(llama.numbers.cost.fused_allreduce) == 0.0


@pytest.mark.parametrize(
    ("engine", "fusion"),
    [
        ("sglang", SGLANG_056_FUSION),
        ("sglang-0.5.9", SGLANG_059_FUSION),
        ("trtllm", TRTLLM_FUSION),
        ("sglang-0.4", None),  # 0.4.0-0.4.5 came before the fused kernel (PR 7621, 2025-06)
        ("vllm", None),  # vLLM's own fusion pass is not priced (docs/modelling.md)
        ("vllm-0.15", None),
        ("plain", None),
        ("llama.cpp", None),
    ],
)
def test_each_preset_fuses_by_its_own_release(engine, fusion):
    assert ENGINES[engine].allreduce_fusion == fusion


def test_spec_and_capacity_say_where_the_engine_fuses_the_all_reduces(runner):
    """gpt-oss-120b at TP 8: SGLang on B200 fuses (the note gives both latencies, in `spec` and
    in `capacity`); on H200, or under vLLM, nothing is fused and no note is printed."""
    base = ["spec", "--target", "gpt-oss-120b", "--draft", "none", "--tp", "8", "--json"]
    fused = json.loads(runner.invoke(app, [*base, "--gpu", "b200", "--engine", "sglang"]).stdout)
    assert (
        "sglang fuses gpt-oss-120b's tensor-parallel all-reduces with the residual add and "
        "RMSNorm on NVIDIA B200 (HGX, 180GB): 8.7 us each in passes of up to 2,048 tokens, where "
        "an unfused one is priced at 25 us"
    ) in fused["notes"]
    for gpu, engine in (("h200", "sglang"), ("b200", "vllm")):
        plain = json.loads(runner.invoke(app, [*base, "--gpu", gpu, "--engine", engine]).stdout)
        assert not any(" fuses " in note for note in plain["notes"]), (gpu, engine)
    capacity = [
        "capacity",
        *("--target", "gpt-oss-120b", "--draft", "none", "--gpu", "b200", "--tp", "8"),
        *("--engine", "sglang", "--input-tokens", "300", "--output-tokens", "200"),
        *("--request-rate", "2", "--json"),
    ]
    notes = json.loads(runner.invoke(app, capacity).stdout)["notes"]
    assert [n for n in notes if " fuses " in n] == [n for n in fused["notes"] if " fuses " in n]
