"""Roofline step time: its shape (its calibration against published measurements is
tests/test_calibration.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infersize.core.deployment import deployment_numbers, prepare_side
from infersize.core.engines import get_engine
from infersize.core.latency import PassLoad, allreduce_bus_bytes_per_s, pass_seconds, step_time_s
from infersize.core.memory import kv_cache_bytes, step_traffic
from infersize.core.serving.replica import replica
from infersize.core.serving.step import decode_batch, engine_step_seconds
from infersize.core.speed import deployment_speed
from infersize.core.speedup import get_speedup_model
from infersize.service.resolve import resolve_side


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


def test_a_linear_attention_state_is_read_and_written_back_every_step(catalog, vllm):
    """Qwen3-Next's Gated DeltaNet state is updated where it lies every step (vLLM's decode
    passes `inplace_final_state=True`, SGLang's stores the final state back to `h0_source`):
    256 decodes on 4 x B200 move 256 states twice, one more time than their KV read, at the KV
    share of the bandwidth; the simulator's replica moves it twice and its pool holds it once."""
    qwen = side(catalog, "qwen3-next-80b-a3b", gpu="b200", tp=4)
    target = qwen.numbers
    state = float(target.kv.state_bytes_per_sequence)
    assert state > 0 and step_traffic(target.kv).state_bytes_per_sequence == 2 * state
    moved = engine_step_seconds(target, None, vllm, decode_batch(target, None, 256, 1000, 0))
    read_once = PassLoad(
        tokens=256.0, kv_bytes=kv_cache_bytes(target.kv, 1000, 256), attended=256.0 * 1000
    )
    once = float(pass_seconds(target.cost, vllm, read_once))
    bandwidth = catalog.gpu("b200").bandwidth_bytes_per_s * (vllm.kv_mbu or vllm.mbu)
    assert float(moved.total) - once == pytest.approx(256 * state / bandwidth, rel=1e-9)
    dep = deployment_numbers(qwen, None, catalog.gpu("b200"), engine=vllm)
    served = replica(dep, vllm, 0)
    assert served.target_kv.state_bytes_per_sequence == 2 * state
    assert served.pool_kv.state_bytes_per_sequence == state


def test_allreduce_bus_bandwidth_is_the_measured_one_on_nvlink4_else_the_line_rate(catalog):
    # 8 x H100 NCCL (ByteDance-Seed/Triton-distributed#57): 32.42 us at 1 MiB, 135.68 at 16 MiB
    slope_s_per_byte = (135.68e-6 - 32.42e-6) / (15 * 2**20)
    measured = 2 * 7 / 8 / slope_s_per_byte
    for gpu in ("h100-sxm", "h200-sxm"):
        assert allreduce_bus_bytes_per_s(catalog.gpu(gpu)) == pytest.approx(measured, rel=2e-3)
    assert allreduce_bus_bytes_per_s(catalog.gpu("a100-80gb-sxm")) == 300e9  # 600 both ways
    assert allreduce_bus_bytes_per_s(catalog.gpu("l40s")) == 32e9  # PCIe Gen4 x16


def test_tp8_allreduce_time_follows_the_measured_h100_curve(catalog, plain):
    # two all-reduces a layer of tokens · 8192 · 2 bytes: the step difference between 64 and
    # 1,024 new tokens (1 and 16 MiB messages) holds the all-reduce's 103.26 us of the table
    cost = side(catalog, "llama-3.1-70b", gpu="h100-sxm", tp=8).numbers.cost
    loads = [PassLoad(tokens=float(t), kv_bytes=0.0, attended=0.0) for t in (64, 1024)]
    t_small, t_large = (float(pass_seconds(cost, plain, load)) for load in loads)
    compute = 960 * cost.flops_per_token / (cost.peak_flops * plain.mfu)
    allreduce = (t_large - t_small - compute) / (2 * cost.layers)
    assert allreduce == pytest.approx(135.68e-6 - 32.42e-6, rel=0.01)


@pytest.mark.parametrize(("model", "indexed"), [("glm-5", 78), ("deepseek-v3.2-mtp", 1)])
def test_a_lightning_indexer_adds_its_fixed_cost_to_every_layer_it_sits_in(catalog, model, indexed):
    """DeepSeek Sparse Attention's indexer runs in every layer of GLM-5 (78) and of
    DeepSeek-V3.2's MTP layer (1): each pays the engine's dsa_layer_overhead_s once a pass,
    on top of what the same model costs without it."""
    sglang = get_engine("sglang-0.5.9")
    cost = side(catalog, model, "fp8", "b200", 8).numbers.cost
    load = PassLoad(tokens=4.0, kv_bytes=0.0, attended=0.0)
    without = pass_seconds(cost, replace(sglang, dsa_layer_overhead_s=0.0), load)
    with_indexer = pass_seconds(cost, replace(sglang, dsa_layer_overhead_s=1e-4), load)
    assert float(with_indexer - without) == pytest.approx(indexed * 1e-4, rel=1e-12)


def test_a_model_without_an_indexer_pays_no_indexer_cost(catalog):
    sglang = get_engine("sglang")
    cost = side(catalog, "deepseek-r1", "fp8", "b200", 8).numbers.cost
    load = PassLoad(tokens=1.0, kv_bytes=0.0, attended=0.0)
    assert pass_seconds(cost, replace(sglang, dsa_layer_overhead_s=1.0), load) == pass_seconds(
        cost, replace(sglang, dsa_layer_overhead_s=0.0), load
    )


def test_a_linear_attention_layer_costs_its_chunked_kernels_outside_cuda_graphs_only(catalog):
    """Qwen3-Next's 36 Gated DeltaNet layers (of 48) prefill through chunked Triton kernels
    launched from the host: a pass outside CUDA graphs pays eager_linear_layer_overhead_s for
    each of them, a captured decode pass nothing more."""
    sglang = get_engine("sglang")
    cost = side(catalog, "qwen3-next-80b-a3b", "bf16", "b200", 8).numbers.cost
    assert cost.linear_layers == 36

    def added(eager):
        load = PassLoad(tokens=300.0, kv_bytes=0.0, attended=0.0, eager=eager)
        priced = pass_seconds(cost, replace(sglang, eager_linear_layer_overhead_s=1e-3), load)
        return float(
            priced - pass_seconds(cost, replace(sglang, eager_linear_layer_overhead_s=0.0), load)
        )

    assert added(1.0) == pytest.approx(36 * 1e-3, rel=1e-12)
    assert added(0.0) == 0.0


def test_a_moe_layer_costs_its_architectures_own_where_a_fit_page_priced_it(catalog):
    """Qwen3-235B's layers take qwen3_moe's own cost (fitted to its page), MiniMax-M2's the
    pooled one (no fit rows of its own), and DeepSeek's MTP layer its target's (deepseek_v3),
    the pooled one when it is priced alone."""
    sglang = get_engine("sglang")
    own = dict(sglang.moe_layer_overhead_by_architecture)
    assert sglang.moe_layer_cost_s("qwen3_moe") == own["qwen3_moe"] != sglang.moe_layer_overhead_s
    assert sglang.moe_layer_cost_s("minimax_m2") == sglang.moe_layer_overhead_s
    load = PassLoad(tokens=1.0, kv_bytes=0.0, attended=0.0)

    def moe_cost(name, target=None):
        side, _ = resolve_side(
            name,
            "auto",
            catalog,
            catalog.kv_dtype("bf16"),
            catalog.gpu("b200"),
            8,
            engine=sglang,
            target_architecture=target,
        )
        cost = side.numbers.cost
        pooled = replace(cost, moe_layer_s=float("nan"))
        without = replace(sglang, moe_layer_overhead_s=0.0)
        spread = float(pass_seconds(cost, without, load) - pass_seconds(pooled, without, load))
        return spread / cost.moe_layers

    assert moe_cost("qwen3-235b-a22b") == pytest.approx(own["qwen3_moe"])
    sglang = replace(sglang, moe_layer_overhead_by_architecture=(("deepseek_v3", 1e-4),))
    assert moe_cost("deepseek-v3-mtp", "deepseek_v3") == pytest.approx(1e-4)
    assert moe_cost("deepseek-v3-mtp") == pytest.approx(sglang.moe_layer_overhead_s)
