"""Roofline time of one forward pass of a model on a GPU.

t(pass) = bytes / (bandwidth · mbu) + flops / (peak · mfu) + fixed cost + all-reduce
  bytes  = weights streamed once per pass (at mbu of the bandwidth) + the KV cache bytes its
           attention reads (at kv_mbu: attention kernels stream it closer to the peak)
  flops  = 2 · active params · T + attention 4 · layers · q_heads · head_dim · A
  fixed  = step overhead + layers · per-layer overhead (launches: what makes tiny drafts slow)
  TP     = 2 all-reduces per layer of T · hidden activations over the interconnect (ring)
T the pass's new tokens, A = Σ over them of the tokens each attends to. A decode of B sequences
of context L with n new tokens each (1 to decode, K+1 to verify) has T = B · n, A = B · n · L and
reads B · kv(L); an engine step mixes decodes with prefill chunks (core/serving/step.py).

The memory and compute terms add rather than overlap (max): measured decode steps do not overlap
them. The step-time model fitted to vLLM on H100 for Llama-3.1-8B (MagicDec, arXiv 2408.11049)
is additive, T = a · KV tokens + b · batch tokens + c, and prices verifying 5 tokens at 1.74x a
decode step at batch 64, where max() would give about 1.0x.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from infersize.catalog.records import ComponentBytes, Gpu, Model, WeightFormat
from infersize.core.allreduce import AllReduceFusion
from infersize.core.arrays import FloatArray, Num, floats
from infersize.core.engines import Engine
from infersize.core.memory import ACTIVATION_BYTES, KvLayout, kv_cache_bytes, step_traffic
from infersize.core.params import ParamCounts
from infersize.record import record

PCIE4_X16_GB_PER_S = 64.0
# Weight-only (dequantising) kernels unpack the weights inside the GEMM and multiply at 16 bit:
# compute runs at the 16-bit peak, and dequantising costs about 5 % of it when compute-bound
# (Marlin, IST-DASLab/marlin README @2f6d7c1, A10, group 128: 3.09x of an ideal 3.27x at batch 64,
# 1.55x of 1.64x at batch 128). Memory-bound decode streams the packed bytes at full speed
# ("essentially ideal speedups ... up to batchsizes around 16-32").
WEIGHT_ONLY_COMPUTE_EFFICIENCY = 0.945
COMPUTE_BITS = {"fp8": 8.0, "int8": 8.0, "fp4": 4.0}  # by compute dtype; the rest 16


@record
class StepCost:
    """What one forward pass of one model costs on one GPU (per tensor-parallel rank)."""

    dense_bytes: Num  # weights read every step (all but the routed experts)
    expert_bytes: Num  # routed-expert weights (MoE), read as far as tokens touch them
    experts: Num  # routed experts per layer (1 for dense models)
    experts_per_tok: Num
    kv: KvLayout
    flops_per_token: Num  # 2 · active matmul params (incl. lm_head) per rank
    attn_flops_per_token_ctx: Num  # 4 · layers · q_heads · head_dim per rank, per context token
    layers: Num
    hidden: Num
    tp: Num
    bandwidth_bytes_per_s: Num
    peak_flops: Num
    link_bytes_per_s: Num  # all-reduce bus bandwidth, per GPU (allreduce_bus_bytes_per_s)
    moe_layers: Num = 0.0  # layers with routed experts (each a fixed cost a pass: Engine)
    # the engine's cost of each for the architecture (Engine.moe_layer_cost_s; NaN: its pooled)
    moe_layer_s: Num = math.nan
    mla_layers: Num = 0.0  # layers of multi-head latent attention (the same)
    dsa_layers: Num = 0.0  # layers with a lightning indexer (DeepSeek Sparse Attention; the same)
    linear_layers: Num = 0.0  # linear-attention (Gated DeltaNet) layers (a cost outside graphs)
    compute_bits: Num = 16.0  # the matmuls' input width: 16, 8 (FP8, INT8) or 4 (FP4)
    fused_allreduce: Num = 0.0  # 1: the engine fuses its all-reduces (core/allreduce.py)


def _attention_flops_per_context(model: Model) -> float:
    """Per layer, per new token, per context token: scores and weighted values, 2 FLOPs per
    multiply-add. GQA: 2 · n_h · d each. MLA decodes in the latent space (weights absorbed):
    scores over r_kv + d_rope, values over r_kv."""
    n = model.num_attention_heads
    if (mla := model.mla) is not None:
        return 2.0 * n * (2 * mla.kv_lora_rank + mla.qk_rope_head_dim)
    return 4.0 * n * model.head_dim_resolved


def _pass_share(model: Model) -> float:
    """The share of a drafter's weights one draft pass runs: an MLP speculator runs one of
    its K stages per pass; every other model runs all of its weights."""
    if model.speculator == "mlp_speculator":
        return 1.0 / (model.speculator_heads or 1)
    return 1.0


def _head_matmul(model: Model, counts: ParamCounts) -> int:
    """Output-head parameters each token multiplies: the LM head (or tied embedding), an
    EAGLE-3 head's draft vocabulary only, every Medusa head's or MLP stage's own head."""
    if model.speculator in ("medusa", "mlp_speculator"):
        return counts.lm_head
    if model.speculator == "ngram":
        return 0
    return (model.draft_vocab_size or model.vocab_size) * model.hidden_size


def step_cost(
    model: Model,
    counts: ParamCounts,
    weights: ComponentBytes,
    fmt: WeightFormat,
    kv: KvLayout,
    gpu: Gpu,
    tp: int = 1,
    weight_only: bool = False,
    fused_allreduce: bool = False,
    moe_layer_s: float = math.nan,
) -> StepCost:
    """The per-step constants of `model` at precision `fmt` on `gpu`, split over `tp` ranks.
    `weight_only`: the GPU dequantises `fmt` (support.yaml), so it multiplies at 16 bit.
    `fused_allreduce`: the engine fuses the all-reduces of its passes. `moe_layer_s`: the
    engine's fixed cost of a MoE layer of this architecture (NaN: the engine's pooled one)."""
    share = _pass_share(model)
    read = float(weights.read_per_step) * share
    expert_bytes = weights.linear * counts.mlp_routed / counts.linear if counts.linear else 0.0
    moe = model.moe
    active = (counts.attention + counts.mlp_active + _head_matmul(model, counts)) * share
    return StepCost(
        compute_bits=16.0 if weight_only else COMPUTE_BITS.get(fmt.compute_dtype, 16.0),
        moe_layers=moe_layer_count(model),
        moe_layer_s=moe_layer_s,
        mla_layers=model.num_hidden_layers if model.mla is not None else 0,
        dsa_layers=model.num_hidden_layers if model.index_n_heads is not None else 0,
        linear_layers=model.linear_attention_layers,
        dense_bytes=read - expert_bytes,
        expert_bytes=expert_bytes,
        experts=moe.num_experts if moe else 1,
        experts_per_tok=moe.num_experts_per_tok if moe else 1,
        kv=kv,
        flops_per_token=2.0 * active / tp,
        attn_flops_per_token_ctx=model.num_hidden_layers * _attention_flops_per_context(model) / tp,
        layers=model.num_hidden_layers,
        hidden=model.hidden_size,
        tp=tp,
        bandwidth_bytes_per_s=gpu.bandwidth_bytes_per_s,
        peak_flops=gpu.peak_flops("fp16") * WEIGHT_ONLY_COMPUTE_EFFICIENCY
        if weight_only
        else gpu.peak_flops(fmt.compute_dtype),
        link_bytes_per_s=allreduce_bus_bytes_per_s(gpu),
        fused_allreduce=1.0 if fused_allreduce else 0.0,
    )


def allreduce_bus_bytes_per_s(gpu: Gpu) -> float:
    """The bus bandwidth a ring all-reduce's 2(n-1)/n · message bytes per GPU move at: the
    measured one where the catalog has it (8 x H100 NVLink: 266.6 GB/s, 59 % of the 450 GB/s
    line rate, configs/gpus.yaml), else the interconnect's one-direction line rate (marketed
    figures are bidirectional; without one, PCIe Gen4 x16, 64 GB/s both ways)."""
    if gpu.allreduce_bus_gb_per_s is not None:
        return gpu.allreduce_bus_gb_per_s * 1e9
    return (gpu.interconnect_gb_per_s or PCIE4_X16_GB_PER_S) * 1e9 / 2


def moe_layer_count(model: Model) -> int:
    """The layers whose MLP routes to experts: every layer after the first k dense ones, or
    every step-th (Llama-4), as core/params.py counts their parameters."""
    moe = model.moe
    if moe is None:
        return 0
    return (model.num_hidden_layers - moe.first_k_dense_replace) // moe.layer_step


@record(kw_only=False)
class PassLoad:
    """What one forward pass of one model computes: its new tokens (every sequence's), the KV
    cache bytes its attention reads, and Σ over its new tokens of the tokens each attends to;
    `eager` 1 where the pass runs outside CUDA graphs (Engine.eager_layer_overhead_s)."""

    tokens: Num
    kv_bytes: Num
    attended: Num
    eager: Num = 0.0


def uniform_load(
    kv: KvLayout, batch: ArrayLike, new_tokens: ArrayLike, context: ArrayLike
) -> PassLoad:
    """`batch` sequences of `context` tokens each computing `new_tokens` new ones."""
    tokens = floats(batch) * floats(new_tokens)
    return PassLoad(
        tokens=tokens,
        kv_bytes=kv_cache_bytes(step_traffic(kv), context, batch),
        attended=floats(tokens * floats(context)),
    )


def experts_read(
    experts_per_tok: ArrayLike, experts: ArrayLike, tokens: ArrayLike, ep: int = 1
) -> FloatArray:
    """The expected share of a MoE layer's E experts that `tokens` tokens, each routed to k of
    them, read: 1 - (1 - k/E)^tokens (every one, 1, for a dense model: k = E = 1). Split over
    `ep` expert-parallel groups of E/ep whole experts, the step waits for the group that reads
    the most: the expected largest of ep counts of touched experts, each binomial over its E/ep
    experts at that share (experts touched independently), over E/ep (busiest_share)."""
    share = floats(experts_per_tok) / floats(experts)
    touched = floats(1.0 - (1.0 - share) ** floats(tokens))
    if ep <= 1:
        return touched
    return busiest_share(touched, np.maximum(floats(experts) // ep, 1.0), ep)


def busiest_share(p: FloatArray, n: FloatArray, groups: int) -> FloatArray:
    """E[max of `groups` Binomial(n, p)] / n: Σ_m P(max > m) = Σ_m (1 − F(m)^groups), F the
    binomial CDF, its terms summed from F(0) = (1 − p)^n by pmf(m+1) = pmf(m) · (n−m)/(m+1) ·
    p/(1−p) (p = 1: every expert)."""
    p, n = np.broadcast_arrays(floats(p), floats(n))
    q = np.clip(1.0 - p, 1e-300, 1.0)
    pmf = q**n
    cdf = pmf.copy()
    expected = np.zeros_like(p)
    ratio = np.clip(p, 0.0, 1.0) / q
    for m in range(int(n.max())):
        expected += np.where(m < n, 1.0 - cdf**groups, 0.0)
        pmf = pmf * np.maximum(n - m, 0.0) / (m + 1.0) * ratio
        cdf = np.minimum(cdf + pmf, 1.0)
    return floats(np.where(p >= 1.0, 1.0, np.minimum(expected / n, 1.0)))


def compute_efficiency(engine: Engine, tokens: ArrayLike, bits: ArrayLike = 16.0) -> FloatArray:
    """The share of the tensor peak a pass of `tokens` new tokens reaches with `bits`-wide
    inputs: the engine's mfu (mfu_fp8, mfu_fp4 for the narrower units, where set), or, where it
    sets mfu_half_tokens, that · T / (T + T_half): a GEMM of few rows leaves most of the tensor
    cores idle and approaches its peak share as rows grow (a saturation curve fitted to
    throughput rows, benchmarks/fit_serving_constants.py)."""
    t, b = floats(tokens), floats(bits)
    fp8 = engine.mfu if engine.mfu_fp8 is None else engine.mfu_fp8
    fp4 = fp8 if engine.mfu_fp4 is None else engine.mfu_fp4
    peak = np.where(b <= 4.0, fp4, np.where(b <= 8.0, fp8, engine.mfu))
    if engine.mfu_half_tokens <= 0:
        return floats(np.broadcast_to(peak, np.broadcast_shapes(t.shape, b.shape)))
    rows = np.maximum(t, 1.0)
    return floats(peak * rows / (rows + engine.mfu_half_tokens))


def allreduce_latency_s(
    unfused_s: float, fusion: AllReduceFusion | None, fused: ArrayLike, tokens: ArrayLike
) -> FloatArray:
    """Seconds of latency per all-reduce of a pass of `tokens` new tokens: the fused kernel's
    where the side fuses (`fused` 1) and the pass fits its workspace, else `unfused_s`."""
    if fusion is None:
        return floats(np.broadcast_to(unfused_s, np.shape(tokens)))
    on = (floats(fused) > 0) & (floats(tokens) <= fusion.max_tokens)
    return floats(np.where(on, fusion.latency_s, unfused_s))


def pass_seconds(
    cost: StepCost, engine: Engine, load: PassLoad, drafter: bool = False
) -> FloatArray:
    """Seconds for one forward pass of the model `cost` describes, computing `load`; a
    drafter's pass pays the engine's per-draft-forward cost in place of its step cost."""
    tokens = floats(load.tokens)
    weight_bytes = cost.dense_bytes + cost.expert_bytes * experts_read(
        cost.experts_per_tok, cost.experts, tokens, engine.ep
    )
    flops = tokens * cost.flops_per_token + cost.attn_flops_per_token_ctx * floats(load.attended)
    kv_mbu = engine.kv_mbu or engine.mbu
    t_memory = (
        weight_bytes / engine.mbu + floats(load.kv_bytes) / kv_mbu
    ) / cost.bandwidth_bytes_per_s
    t_compute = flops / (cost.peak_flops * compute_efficiency(engine, tokens, cost.compute_bits))
    fixed = engine.step_overhead_s
    if drafter and engine.draft_forward_overhead_s is not None:
        fixed = engine.draft_forward_overhead_s
    eager = (
        cost.layers * engine.eager_layer_overhead_s
        + cost.moe_layers * engine.eager_moe_layer_overhead_s
        + cost.mla_layers * engine.eager_mla_layer_overhead_s
        + cost.linear_layers * engine.eager_linear_layer_overhead_s
    )
    moe_s = floats(cost.moe_layer_s)
    t_fixed = (
        fixed
        + cost.layers * engine.layer_overhead_s
        + floats(load.eager) * eager
        + cost.moe_layers * np.where(np.isnan(moe_s), engine.moe_layer_overhead_s, moe_s)
        + cost.mla_layers * engine.mla_layer_overhead_s
        + cost.dsa_layers * engine.dsa_layer_overhead_s
    )
    tp = floats(cost.tp)
    message = tokens * cost.hidden * ACTIVATION_BYTES
    ring = 2.0 * (tp - 1.0) / tp * message / cost.link_bytes_per_s  # 0 at tp = 1
    latency = allreduce_latency_s(
        engine.allreduce_latency_s, engine.allreduce_fusion, cost.fused_allreduce, tokens
    )
    t_allreduce = np.where(tp > 1, 2.0 * cost.layers * (latency + ring), 0.0)
    return floats(t_memory + t_compute + t_fixed + t_allreduce)


def step_time_s(
    cost: StepCost, engine: Engine, batch: ArrayLike, new_tokens: ArrayLike, context: ArrayLike
) -> FloatArray:
    """Seconds for one forward pass of `batch` sequences, `new_tokens` each, at `context`."""
    return pass_seconds(cost, engine, uniform_load(cost.kv, batch, new_tokens, context))
