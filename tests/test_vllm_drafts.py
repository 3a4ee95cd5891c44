"""vLLM V1 with a separate draft model: the fixed cost of each drafter forward, what speculating
adds to the profiling run (the rejection sampler's dry run), and the entry point (`vllm serve`
or LLM(...)) whose batch defaults size the profiling pass. The released rows of
tests/data/measurements.csv (a Qwen3-32B + Qwen3-1.7B run of vLLM on an H100 94GB) check the
first two."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersize.cli import app
from infersize.core.engines import ENGINES, EngineSettings, configure_engine, get_engine
from infersize.core.memory import GIB
from infersize.core.serving.step import StepBatch, decode_batch, engine_step_seconds, step_table
from infersize.core.vllm_pool import Profile, default_profile
from infersize.errors import InfersizeError, SweepConfigError
from infersize.service.calibration import engine_preset, error, load_measurements, predict
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest, resolve_deployment
from infersize.service.spec import run_spec
from infersize.sweep.config import load_sweep

ROWS = load_measurements(Path(__file__).parent / "data" / "measurements.csv")
RELEASED = [r for r in ROWS if r["id"].startswith("tr-qwen3-32b-1.7b-")]
SPEEDUPS = [r for r in RELEASED if r["kind"] == "speculative_speedup"]
POOL = [r for r in RELEASED if r["kind"] != "speculative_speedup"]
QWEN_PAIR = DeploymentRequest(
    target="qwen3-32b", target_quant="bf16", draft="qwen3-1.7b", draft_quant="bf16", gpu="h100-nvl"
)
QWEN3_VOCAB = 151_936  # Qwen/Qwen3-1.7B config.json vocab_size


def _numbers(catalog, draft: str, engine: str = "vllm"):
    request = dataclasses.replace(QWEN_PAIR, draft=draft)
    return resolve_deployment(request, catalog, get_engine(engine)).numbers


def test_the_released_rows_are_within_five_percent():
    """Two batch-1 speedups (K = 2 and 6) and the pool of the K = 4 run, within 5 %: each is
    a `check` row, out of sample for every fitted constant. The pool rows are of a `vllm bench
    throughput` run, so LLM(...)'s defaults size their profiling pass (vllm_entrypoint)."""
    assert len(SPEEDUPS) == 2 and len(POOL) == 2
    for row in RELEASED:
        assert row["split"] == "check" and float(row["tolerance"]) == 0.05
        assert abs(error(row, predict(row))) <= 0.05, row["id"]
    assert {row["vllm_entrypoint"] for row in POOL} == {"offline"}


def test_without_a_cost_per_draft_forward_the_speedups_are_over_predicted():
    """The drafter's K passes each cost their launches and bookkeeping: priced at nothing, the
    speedup is over-predicted, the more the larger K (about +8 % at K = 2, +12 % at K = 6)."""
    free = dataclasses.replace(ENGINES["vllm-0.15"], draft_forward_overhead_s=0.0)
    with engine_preset(free):
        errors = [error(row, predict(row)) for row in SPEEDUPS]
    assert [row["draft_k"] for row in SPEEDUPS] == ["2", "6"]
    assert 0.05 < errors[0] < errors[1]


def test_each_draft_forward_pays_the_draft_forward_cost(catalog):
    """K passes of the drafter per step: raising its per-forward cost by δ lengthens the step's
    drafting by K · δ and leaves the target's verification as it was."""
    dep = _numbers(catalog, "qwen3-1.7b")
    base = ENGINES["vllm"]
    dearer = dataclasses.replace(base, draft_forward_overhead_s=base.step_overhead_s + 5e-4)
    for k in (1, 4, 7):
        batch = decode_batch(dep.target, dep.draft, 8, 2048, k)
        a = engine_step_seconds(dep.target, dep.draft, base, batch)
        b = engine_step_seconds(dep.target, dep.draft, dearer, batch)
        assert float(b.draft - a.draft) == pytest.approx(k * 5e-4, rel=1e-9)
        assert float(b.target) == float(a.target)


def test_the_simulators_table_prices_draft_forwards_as_the_step_does(catalog):
    """With a per-draft-forward cost unlike the step's, the simulator's table still equals the
    step model (prefill chunks beside decodes, K = 3)."""
    dep = _numbers(catalog, "qwen3-1.7b")
    engine = dataclasses.replace(ENGINES["vllm"], draft_forward_overhead_s=3e-4)
    table = step_table(dep.target, dep.draft, engine, 3, 2000)
    batch = StepBatch(
        decode_seqs=12,
        draft_k=3,
        decode_context=12 * 900.0,
        prefill_tokens=300,
        prefill_attended=300 * 301 / 2.0,
        target_kv_bytes=12 * 900 * 2.6e5,
        draft_kv_bytes=12 * 900 * 1.1e5,
    )
    exact = float(engine_step_seconds(dep.target, dep.draft, engine, batch).total)
    looked_up = table.seconds(
        12, 300, 12 * 900.0, 300 * 301 / 2.0, 12 * 900 * 2.6e5, 12 * 900 * 1.1e5
    )
    assert looked_up == pytest.approx(exact, rel=1e-9)


def _spec(catalog, draft: str | None, engine: str, entrypoint: str = "serve"):
    request = SpecRequest(
        deployment=dataclasses.replace(QWEN_PAIR, draft=draft),
        context_length=5000,
        acceptance_rate=None if draft is None else 0.7,
        engine=EngineSettings(engine=engine, vllm_entrypoint=entrypoint),
    )
    return run_spec(request, catalog)


SAMPLER_ROWS = 1024  # the dummy batch: min(max_num_seqs, max_num_batched_tokens) on this GPU


def test_a_draft_model_adds_the_rejection_samplers_dry_run_to_the_sampler_pass(catalog):
    """vllm-0.15 on the H100 NVL (`vllm serve`: 8,192 tokens, 1,024 sequences): the sampler pass
    is the profile's largest, and a drafter adds the rejection sampler's dry run to it, 12
    bytes per row and vocabulary entry of the target: 12 × 1,024 × 151,936 bytes (1.74 GiB).
    The draft's own vocabulary takes nothing (its dummy_run computes no logits), so the pool
    holds the draft's weights and that much less than the target's alone."""
    alone, paired = _spec(catalog, None, "vllm-0.15"), _spec(catalog, "qwen3-1.7b", "vllm-0.15")
    share = 12 * SAMPLER_ROWS * QWEN3_VOCAB
    assert paired.speculative_peak_bytes == share
    assert alone.speculative_peak_bytes == 0
    assert paired.activation_peak_bytes == (alone.activation_peak_bytes or 0) + share
    assert paired.draft is not None and paired.kv_pool_bytes is not None
    lost = (alone.kv_pool_bytes or 0) - paired.kv_pool_bytes
    assert lost == pytest.approx(paired.draft.weights_bytes + share, abs=2)


def test_where_the_forward_pass_is_the_larger_a_draft_adds_no_peak(catalog):
    """vLLM 0.33's rules profile Qwen3-32B's forward over 16,384 tokens (LLM(...)) above the
    triton sampler's pass with the dry run beside it: the peak is the target's forward, and the
    draft takes its weights and graphs from the pool and nothing more."""
    alone = _spec(catalog, None, "vllm", "offline")
    paired = _spec(catalog, "qwen3-1.7b", "vllm", "offline")
    assert paired.speculative_peak_bytes == 0
    assert paired.activation_peak_bytes == alone.activation_peak_bytes
    assert paired.draft is not None and paired.kv_pool_bytes is not None
    lost = (alone.kv_pool_bytes or 0) - paired.kv_pool_bytes
    graphs = (paired.cuda_graph_bytes or 0) - (alone.cuda_graph_bytes or 0)
    assert lost == pytest.approx(paired.draft.weights_bytes + graphs, abs=2)


def test_an_eagle_head_pays_the_dry_run_as_a_draft_model_does(catalog):
    """The dry run runs for every speculative method, heads included: an EAGLE head on
    Llama-3.1-8B (vllm-0.15, an H100 at `vllm serve`'s 1,024 rows) adds 12 × 1,024 × 128,256
    bytes to the sampler pass. Row g1 of tests/data/measurements.csv (vLLM 0.9.1, before
    https://github.com/vllm-project/vllm/pull/26060 made the dry run this large) is then
    −4.1 %, inside its ±10 %."""
    request = SpecRequest(
        deployment=DeploymentRequest(target="llama-3.1-8b", draft="eagle-llama3.1-8b", gpu="h100"),
        acceptance_rate=0.7,
        engine=EngineSettings(engine="vllm-0.15"),
    )
    assert run_spec(request, catalog).speculative_peak_bytes == 12 * SAMPLER_ROWS * 128_256


@pytest.mark.parametrize(
    ("gib", "name", "serve", "offline"),
    [
        (79.19, "NVIDIA H100 SXM", (8192, 1024), (16384, 1024)),
        (93.10, "NVIDIA H100 NVL", (8192, 1024), (16384, 1024)),
        (79.15, "NVIDIA A100 80GB", (2048, 256), (8192, 256)),
        (44.42, "NVIDIA L40S", (2048, 256), (8192, 256)),
        (178.0, "NVIDIA B200", (16384, 1024), (16384, 1024)),
    ],
)
def test_each_entrypoint_profiles_its_own_defaults(gib, name, serve, offline):
    """EngineArgs.get_batch_defaults (vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py):
    OPENAI_API_SERVER (`vllm serve`) 8192/1024 from 70 GiB except A100s, else 2048/256;
    LLM_CLASS (LLM(...)) 16384/1024 and 8192/256; 0.28+ gives `vllm serve` 16384 from 160 GiB."""
    for entrypoint, expected in (("serve", serve), ("offline", offline)):
        engine = configure_engine(EngineSettings(engine="vllm", vllm_entrypoint=entrypoint))
        assert default_profile(engine, gib * GIB, name) == Profile(*expected)


def test_the_offline_entrypoint_profiles_twice_the_tokens(catalog):
    """LLM(...) profiles 16,384 tokens on the H100 NVL and as many rows (1,024) as `vllm serve`:
    the drafter's dry run is the same, and the sampler pass (the largest under vllm-0.15) holds
    the hidden states of 8,192 more tokens, 8,192 × 5,120 × 2 bytes more of Qwen3-32B's."""
    serve = _spec(catalog, "qwen3-1.7b", "vllm-0.15")
    offline = _spec(catalog, "qwen3-1.7b", "vllm-0.15", "offline")
    assert (serve.vllm_entrypoint, offline.vllm_entrypoint) == ("serve", "offline")
    assert (serve.max_num_batched_tokens, offline.max_num_batched_tokens) == (8192, 16384)
    assert offline.speculative_peak_bytes == serve.speculative_peak_bytes
    assert (serve.kv_pool_bytes or 0) - (offline.kv_pool_bytes or 0) == 8192 * 5120 * 2


def test_an_unknown_entrypoint_is_refused():
    with pytest.raises(InfersizeError, match="unknown vllm_entrypoint 'batch'"):
        configure_engine(EngineSettings(engine="vllm", vllm_entrypoint="batch"))


SPEC = [
    "spec",
    "--target",
    "qwen3-32b",
    "--draft",
    "qwen3-1.7b",
    "--gpu",
    "h100-nvl",
    "--engine",
    "vllm",
    "--acceptance-rate",
    "0.7",
]


def test_spec_states_the_entrypoint_in_the_panel_and_the_json():
    runner = CliRunner()
    panel = runner.invoke(app, SPEC)
    assert panel.exit_code == 0, panel.output
    assert (
        "vLLM entry point:     `vllm serve`: its defaults profile 8,192 tokens and 1,024 "
        "sequences" in panel.stdout
    )
    # the sampler pass with the dry run (3.58 GiB) over the target's forward (2.73 GiB)
    assert "1024 sequences, 0.84 of it the drafter's)" in panel.stdout
    offline = runner.invoke(app, [*SPEC, "--vllm-entrypoint", "offline", "--json"])
    data = json.loads(offline.stdout)
    assert data["vllm_entrypoint"] == "offline" and data["max_num_batched_tokens"] == 16384
    assert data["speculative_peak_bytes"] == 0  # the target's forward sets the peak here
    early = runner.invoke(app, [*SPEC[:-4], "--engine", "vllm-0.15", "--acceptance-rate", "0.7"])
    assert "1024 sequences, 1.74 of it the drafter's)" in early.stdout
    plain = json.loads(runner.invoke(app, [*SPEC, "--json"]).stdout)
    assert plain["vllm_entrypoint"] == "serve"


def test_a_wrong_entrypoint_on_the_command_line_is_one_line():
    result = CliRunner().invoke(app, [*SPEC, "--vllm-entrypoint", "server"])
    assert result.exit_code == 2
    assert result.stderr == "error: unknown vllm_entrypoint 'server': did you mean 'serve'?\n"


def test_capacity_schedules_with_the_entrypoints_batch_defaults():
    args = [
        "capacity",
        "--target",
        "llama-3.1-8b",
        "--draft",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--engine",
        "vllm",
        "--acceptance-rate",
        "0.7",
        "--draft-k",
        "3",
        "--requests",
        "100",
        "--input-tokens",
        "512",
        "--output-tokens",
        "64",
        "--request-rate",
        "1",
        "--json",
    ]
    runner = CliRunner()
    serve = json.loads(runner.invoke(app, args).stdout)
    offline = json.loads(runner.invoke(app, [*args, "--vllm-entrypoint", "offline"]).stdout)
    assert serve["baseline"]["max_num_batched_tokens"] == 8192
    assert offline["baseline"]["max_num_batched_tokens"] == 16384


SWEEP = """\
name: t
engine: vllm
vllm_entrypoint: {entrypoint}
targets: [llama-3.1-8b]
drafts: [llama-3.2-1b]
gpus: [h100]
context_lengths: [4096]
"""


def test_a_sweep_reads_the_entrypoint(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(entrypoint="offline"))
    config, _ = load_sweep(path)
    assert config.vllm_entrypoint == "offline"
    path.write_text(SWEEP.format(entrypoint="batch"))
    with pytest.raises(SweepConfigError, match="vllm_entrypoint"):
        load_sweep(path)
