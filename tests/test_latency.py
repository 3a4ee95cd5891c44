"""Roofline step time: its shape (its calibration against published measurements is
tests/test_calibration.py)."""

from __future__ import annotations

import numpy as np
import pytest

from infersize.core.deployment import prepare_side
from infersize.core.latency import step_time_s
from infersize.core.speed import deployment_speed
from infersize.core.speedup import get_speedup_model


def side(catalog, model, quant="bf16", gpu="h100", tp=1):
    return prepare_side(
        catalog.model(model),
        catalog.weight_format(quant),
        catalog.kv_dtype("bf16"),
        catalog.gpu(gpu),
        tp,
    )


def test_decode_is_bandwidth_bound_at_batch_1(catalog, plain):
    target = side(catalog, "llama-3.1-8b")
    t = float(step_time_s(target.numbers.cost, plain, 1, 1, 1024))
    floor = target.weights.read_per_step / catalog.gpu("h100").bandwidth_bytes_per_s
    assert floor < t < 2 * floor


def test_verification_costs_about_one_step_at_batch_1_and_more_at_batch_64(catalog, plain):
    target = side(catalog, "llama-3.1-8b")
    ratio = step_time_s(target.numbers.cost, plain, np.array([1, 64, 512]), 5, 1024) / step_time_s(
        target.numbers.cost, plain, np.array([1, 64, 512]), 1, 1024
    )
    assert ratio[0] == pytest.approx(1.0, abs=0.02)
    assert ratio[0] < ratio[1] < ratio[2]


def test_tiny_draft_is_dominated_by_fixed_cost(catalog, plain):
    draft = side(catalog, "llama-68m", "fp16")
    t = float(step_time_s(draft.numbers.cost, plain, 1, 1, 512))
    fixed = plain.step_overhead_s + 2 * plain.layer_overhead_s
    assert t < 3 * fixed


def test_tensor_parallel_is_faster_but_not_linear(catalog, plain):
    one = float(step_time_s(side(catalog, "llama-3.1-70b").numbers.cost, plain, 1, 1, 1024))
    four = float(step_time_s(side(catalog, "llama-3.1-70b", tp=4).numbers.cost, plain, 1, 1, 1024))
    assert one / 4 < four < one / 2


def test_moe_touches_more_experts_as_batch_grows(catalog, plain):
    moe = side(catalog, "mixtral-8x7b")
    t1, t64 = step_time_s(moe.numbers.cost, plain, np.array([1, 64]), 1, 512)
    # batch 1 reads 2 of 8 experts per layer; batch 64 reads nearly all of them
    assert t64 > 2.5 * t1


def test_roofline_speedup_falls_with_batch_70b_with_1b_draft(catalog, plain):
    # vLLM: Llama-3.3-70B (TP2 H100) with a Llama-3.2-1B draft slows decoding at batch >= 128
    target = side(catalog, "llama-3.1-70b", tp=2)
    draft = side(catalog, "llama-3.2-1b")
    batches = np.array([1, 4, 32, 128, 512])
    roofline = get_speedup_model("roofline")
    s = deployment_speed(target.numbers, draft.numbers, plain, roofline, 2048, batches, 0.7, 5)
    s = s.speedup
    assert s[0] > 2.0
    assert np.all(np.diff(s) < 0)
    assert s[-1] < 1.0
