"""How each engine schedules what the simulator serves, and what a MoE step reads: an idle
engine steps as soon as one request is in (a closed loop started at once does not stay in
lockstep); SGLang runs prompts in steps of their own while the decodes wait (unless
--enable-mixed-chunk); TensorRT-LLM admits a request only when its whole answer fits and never
preempts; expert parallelism waits for the busiest group of experts; attention data parallel
keeps one copy of MLA's latent per sequence; and the CUDA-graph engines pay a launch cost a
layer for passes outside their graphs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from infersize.cli import app
from infersize.core.engines import EngineSettings
from infersize.core.latency import busiest_share, experts_read
from infersize.core.serving.step import StepBatch, engine_step_seconds
from infersize.service.capacity.arm import make_arm, serve
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

LLAMA = ["--target", "llama-3.1-8b", "--draft", "none", "--gpu", "h100"]
DEEPSEEK = ["--target", "deepseek-r1", "--draft", "none", "--gpu", "b200", "--tp", "8"]


def served(catalog, engine, clients=4, inputs=1024, outputs=64, requests=16, **settings):
    request = CapacityRequest(
        spec=SpecRequest(
            deployment=DeploymentRequest(target="llama-3.1-8b", gpu="h100"),
            engine=EngineSettings(engine=engine, **settings),
        ),
        traffic=Traffic(
            input_tokens=(inputs,), output_tokens=(outputs,), concurrency=clients, requests=requests
        ),
    )
    prepared = prepare_capacity(request, catalog)
    arm = make_arm(prepared, request.traffic, 0)
    return arm, serve(arm, request.traffic)


def test_a_closed_loop_started_at_once_splits_at_its_first_step(catalog):
    """The first of four requests sent together runs its prefill alone, the other three join
    the next step: the first TTFT is one prompt's prefill step, the median that step and a
    prefill of three prompts after it beside the first request's decode (to 0.1 %: the decode
    reads the KV of its prompt and its first token)."""
    arm, metrics = served(catalog, "vllm", requests=4)
    table = arm.replica.table
    one = table.seconds(0, 1024, 0.0, 1024 * 1025 / 2, 0.0, 0.0)
    assert metrics.ttft_s.get("p50") > one
    kv = 1024 * float(arm.replica.target_kv.full_bytes_per_token)
    three = table.seconds(1, 3 * 1024, 1024, 3 * 1024 * 1025 / 2, kv * 3, 0.0)
    assert metrics.ttft_s.get("p50") == pytest.approx(one + three, rel=1e-3)


@pytest.mark.parametrize("clients", [2, 8])
def test_sglang_holds_the_decodes_back_while_prompts_run_unless_mixed(catalog, clients):
    """Separate prefill steps stall every running decode; mixing them in (SGLang's
    --enable-mixed-chunk, vLLM's chunked prefill) lets decodes advance beside the prompts, so
    the same requests end sooner."""
    arm, alone = served(catalog, "sglang", clients=clients, requests=8 * clients)
    assert not arm.replica.mixed_prefill
    _, mixed = served(
        catalog, "sglang", clients=clients, requests=8 * clients, enable_mixed_chunk=True
    )
    assert alone.e2e_s.get("mean") > mixed.e2e_s.get("mean")


def test_tensorrt_llm_never_preempts_and_admits_what_fits_whole(catalog):
    """A pool too small for every client's whole answer: vLLM's rule admits by the first chunk
    and preempts when decodes run out of room; GUARANTEED_NO_EVICT admits fewer at once and
    never preempts."""
    settings = {"kv_cache_free_gpu_memory_fraction": 0.02}
    arm, metrics = served(
        catalog, "trtllm", clients=64, inputs=2048, outputs=2048, requests=64, **settings
    )
    assert metrics.preemptions == 0
    whole = (2048 + 2048) * float(arm.replica.pool_kv.full_bytes_per_token)
    assert metrics.mean_running_sequences <= arm.replica.kv_capacity_bytes / whole + 1e-9


def test_expert_parallel_waits_for_the_busiest_group():
    """E[max of g Binomial(n, p)] / n, by hand: one expert a group at p = 1/2 and two groups,
    P(max = 1) = 1 - 1/4 = 0.75; two experts a group, P(max >= 1) = 1 - (1/4)^2 = 0.9375 and
    P(max = 2) = 1 - (3/4)^2 = 0.4375, so E[max] = 1.375 of 2."""
    assert busiest_share(np.array([0.5]), np.array([1.0]), 2)[0] == pytest.approx(0.75)
    assert busiest_share(np.array([0.5]), np.array([2.0]), 2)[0] == pytest.approx(1.375 / 2)
    tokens = np.array([1.0, 8.0, 64.0, 4096.0])
    one_group = experts_read(8, 256, tokens, 1)
    assert np.allclose(one_group, 1 - (1 - 8 / 256) ** tokens)  # uniform routing, no EP
    eight = experts_read(8, 256, tokens, 8)
    assert np.all(eight >= one_group - 1e-12) and eight[-1] == pytest.approx(1.0)


def test_expert_parallel_slows_a_small_moe_step(runner):
    """At batch 1 DeepSeek-R1's 8 routed experts fall unevenly on 8 groups of 32: the busiest
    group reads more than the mean, so the step is slower than with every expert split."""
    speeds = []
    for ep in ("1", "8"):
        result = runner.invoke(app, ["spec", *DEEPSEEK, "--engine", "sglang", "--ep", ep, "--json"])
        assert result.exit_code == 0, result.output
        speeds.append(json.loads(result.stdout)["baseline_tokens_per_s"])
    assert speeds[1] < speeds[0]


def test_attention_data_parallel_keeps_one_latent_per_sequence(runner):
    """MLA's latent is copied on every TP rank; with attention data parallel each rank holds
    its own sequences' latents only, so the pool holds about TP times the tokens (a little
    less: the attention weights are whole on every rank)."""
    tokens = []
    for flag in ("--no-dp-attention", "--dp-attention"):
        result = runner.invoke(app, ["spec", *DEEPSEEK, "--engine", "sglang", flag, "--json"])
        assert result.exit_code == 0, result.output
        tokens.append(json.loads(result.stdout)["max_total_num_tokens"])
    assert 6 * tokens[0] < tokens[1] < 8 * tokens[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--ep", "2"],
            "error: --ep is a setting of vllm, sglang, trtllm: it does not apply to engine plain",
        ),
        (
            ["--engine", "vllm", "--ep", "2"],
            "error: --ep (2) splits routed experts: llama-3.1-8b has none",
        ),
        (
            ["--engine", "sglang", "--dp-attention", "--enable-mixed-chunk", "--ep", "0"],
            "error: --ep must be in 1..1,024 groups, got 0",
        ),
        (
            ["--engine", "vllm", "--enable-mixed-chunk"],
            "error: --enable-mixed-chunk is a setting of sglang: it does not apply to engine vllm",
        ),
        (
            ["--engine", "vllm", "--cuda-graph-max-bs", "8"],
            "error: --cuda-graph-max-bs is a "
            "setting of sglang, trtllm: it does not apply to engine vllm",
        ),
    ],
)
def test_parallel_and_scheduling_settings_are_checked(runner, args, message):
    result = runner.invoke(app, ["spec", *LLAMA, *args])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == message


def test_an_expert_parallel_size_must_divide_the_ranks(runner):
    result = runner.invoke(app, ["spec", *DEEPSEEK, "--engine", "trtllm", "--ep", "3"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "error: --ep (3) must divide --tp (8) and deepseek-r1's 256 routed experts"
    )


def test_passes_outside_cuda_graphs_pay_a_launch_cost_a_layer(catalog):
    """A decode batch above cuda_graph_max_bs, and under SGLang any step with prompt tokens,
    costs layers x eager_layer_overhead_s more than the same step in a graph."""
    prepared = prepare_capacity(
        CapacityRequest(
            spec=SpecRequest(
                deployment=DeploymentRequest(target="llama-3.1-8b", gpu="h100"),
                engine=EngineSettings(engine="sglang", cuda_graph_max_bs=16),
            ),
            traffic=Traffic(input_tokens=(64,), output_tokens=(64,), concurrency=1),
        ),
        catalog,
    )
    engine, target = prepared.engine, prepared.deployment.numbers.target
    eager = 32 * engine.eager_layer_overhead_s

    def step(seqs: int, prefill: int = 0) -> float:
        batch = StepBatch(
            decode_seqs=seqs, draft_k=0, decode_context=seqs * 100.0, prefill_tokens=prefill
        )
        return float(engine_step_seconds(target, None, engine, batch).total)

    graphed = dataclasses.replace(engine, cuda_graph_max_bs=None, eager_prefill=False)

    def in_graph(seqs: int, prefill: int = 0) -> float:
        batch = StepBatch(
            decode_seqs=seqs, draft_k=0, decode_context=seqs * 100.0, prefill_tokens=prefill
        )
        return float(engine_step_seconds(target, None, graphed, batch).total)

    assert step(16) == pytest.approx(in_graph(16))
    assert step(17) - in_graph(17) == pytest.approx(eager)
    assert step(4, prefill=64) - in_graph(4, prefill=64) == pytest.approx(eager)


EP_SWEEP = """\
name: ep
pairs:
  - {target: deepseek-r1, draft: deepseek-v3-mtp}
target_quants: [fp8]
draft_quants: [fp8]
gpus:
  - {name: b200, tp: [8]}
context_lengths: [2048]
batch_sizes: [1, 64]
draft_k: {start: 1, stop: 3, step: 1}
engine: sglang
ep: 8
dp_attention: true
enable_mixed_chunk: true
cuda_graph_max_bs: 32
"""


def test_a_sweep_takes_the_settings_by_their_flags_names(tmp_path, runner):
    """The sweep keys are the flags' names: each row of the sweep is `spec` with the flags."""
    path = tmp_path / "ep.yaml"
    path.write_text(EP_SWEEP)
    config, doc = load_sweep(path)
    engine = build_plan(config, doc).scoring.engine
    assert (engine.get("ep"), engine.get("dp_attention"), engine.get("enable_mixed_chunk")) == (
        8,
        True,
        True,
    )
    assert engine.get("cuda_graph_max_bs") == 32
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", "run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for row in pq.read_table(out / "best_pairs.parquet").to_pylist():
        args = [
            "spec",
            *DEEPSEEK[:2],
            "--method",
            "mtp",
            *DEEPSEEK[4:],
            "--engine",
            "sglang",
            "--ep",
            "8",
            "--dp-attention",
            "--enable-mixed-chunk",
            "--cuda-graph-max-bs",
            "32",
            "--context-length",
            "2048",
            "--batch-size",
            str(row["batch_size"]),
            "--max-k",
            "3",
            "--draft-k",
            "3",
            "--json",
        ]
        data = json.loads(runner.invoke(app, args).stdout)
        assert row["speedup"] == pytest.approx(data["speedup_at_optimal_k"], rel=1e-9)
        assert row["target_kv_gib"] * 2**30 == pytest.approx(data["target"]["kv_cache_bytes"])
