"""SGLang's pools for a hybrid linear-attention model (Qwen3-Next, Qwen3.5) under the `sglang`
presets, each number derived here from SGLang 0.5.6's source
(sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106, 0.5.6.post2):

- configs/mamba_utils.py `Mamba2StateShape.create`, as configs/qwen3_next.py's
  `mamba2_cache_params` calls it: conv_dim = value heads · value dim + 2 · key heads · key dim,
  a conv window (conv_dim / tp, kernel − 1) in bfloat16 (CONV_DTYPE) and a temporal state
  (value heads / tp, value dim, key dim) at mamba_ssm_dtype (server_args.py: "float32");
  `mamba_cache_per_req` sums both over the linear layers.
- model_executor/model_runner.py `handle_max_mamba_cache` (the radix cache on): of the rest
  (M_start · mem_fraction_static − W), r / (1 + r) with r = mamba_full_memory_ratio 0.9 goes to
  ⌊… / (per_req · (1 + n))⌋ state slots, n = speculative_num_draft_tokens; the KV pool takes
  what they leave over the full-attention layers only (`profile_max_num_token`);
  `init_memory_pool` caps the request slots at max_mamba_cache_size // 3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersize.cli import app
from infersize.core import sglang_pool
from infersize.core.engines import EngineSettings, configure_engine, get_engine
from infersize.core.fit import deployment_memory
from infersize.core.knobs import ENGINE_KNOBS
from infersize.core.memory import GIB, step_traffic
from infersize.core.serving.replica import replica
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest, resolve_deployment
from infersize.service.spec import run_spec
from tests.support.sweeps import best_pair_row

# Qwen3-Next-80B-A3B at TP 8 (the sgl-cookbook rows' deployment): 36 Gated DeltaNet layers of
# 16 key and 32 value heads of 128, kernel 4; 12 full-attention layers of 2 KV heads of 256
CONV_DIM = 32 * 128 + 2 * 16 * 128  # 8192
CONV_PER_LAYER = CONV_DIM // 8 * (4 - 1)  # (1024, 3) elements a rank
TEMPORAL_PER_LAYER = 32 // 8 * 128 * 128  # (4, 128, 128) elements a rank
STATE_FP32 = 36 * (CONV_PER_LAYER * 2 + TEMPORAL_PER_LAYER * 4)  # 9,658,368 bytes
STATE_BF16 = 36 * (CONV_PER_LAYER * 2 + TEMPORAL_PER_LAYER * 2)  # 4,939,776 bytes
# get_num_kv_heads(8) = max(1, 2 // 8) = 1 head of 256, K and V, 2 bytes, 12 layers
CELL = 1 * 256 * 2 * 2 * 12  # 12,288 bytes a token
RATIO = 0.9  # mamba_full_memory_ratio
B200 = 191_502_483_456  # bytes, as the catalog holds the B200


def qwen3_next(catalog, engine: str = "sglang", draft: str | None = None, **settings):
    engine_ = configure_engine(EngineSettings(engine=engine, **settings))
    request = DeploymentRequest(target="qwen3-next-80b-a3b", gpu="b200", tp=8, draft=draft)
    return resolve_deployment(request, catalog, engine_), engine_


def spec(catalog, target: str, gpu: str, tp: int = 1, draft: str | None = None, **settings):
    request = SpecRequest(
        deployment=DeploymentRequest(target=target, gpu=gpu, tp=tp, draft=draft),
        engine=EngineSettings(engine="sglang", **settings),
        acceptance_rate=0.7 if draft else None,
        draft_k=3,
        context_length=1000,
        batch_size=1,
    )
    return run_spec(request, catalog)


def rest(result) -> float:
    """M_start · mem_fraction_static − W: the B200 less 0.55 + 1.7 GiB not free at start."""
    free = B200 - round((0.55 + 1.7) * GIB)
    return free * result.mem_fraction_static - result.target.weights_bytes


def test_sglang_holds_the_recurrent_state_in_float32_and_the_window_in_bfloat16(catalog):
    """9,658,368 bytes a request at TP 8 under SGLang's default, 4,939,776 with
    --mamba-ssm-dtype bfloat16, which is also vLLM's layout (the model's 16-bit dtype)."""
    sglang, _ = qwen3_next(catalog)
    assert sglang.numbers.target.kv.state_bytes_per_sequence == STATE_FP32 == 9_658_368
    half, _ = qwen3_next(catalog, mamba_ssm_dtype="bfloat16")
    assert half.numbers.target.kv.state_bytes_per_sequence == STATE_BF16 == 4_939_776
    vllm, _ = qwen3_next(catalog, engine="vllm")
    assert vllm.numbers.target.kv.state_bytes_per_sequence == STATE_BF16
    for dep in (sglang, half, vllm):  # the full-attention layers' KV is the same
        assert dep.numbers.target.kv.full_bytes_per_token == CELL


def test_the_state_pool_takes_its_ratio_of_the_rest_before_the_kv_pool(catalog):
    """The cookbook rows' deployment alone: slots = ⌊rest · 0.9 / 1.9 / 9,658,368⌋, tokens =
    ⌊(rest − slots · 9,658,368) / 12,288⌋, and max_running_requests min(tokens // 2, request
    slots min(max(⌊tokens · 512 / 262,144⌋, 2048), 4096), slots // 3)."""
    result = spec(catalog, "qwen3-next-80b-a3b", "b200", tp=8)
    slots = math.floor(rest(result) * RATIO / (1 + RATIO) / STATE_FP32)
    tokens = math.floor((rest(result) - slots * STATE_FP32) / CELL)
    assert (result.max_mamba_cache_size, result.max_total_num_tokens) == (slots, tokens)
    assert result.mamba_pool_bytes == slots * STATE_FP32
    assert result.kv_pool_bytes == tokens * CELL
    assert result.mamba_ssm_dtype == "float32"
    requests = min(max(math.floor(tokens * 512 / 262_144), 2048), 4096)
    assert result.max_running_requests == min(tokens // 2, requests, slots // 3) == slots // 3


def test_a_speculative_slot_holds_an_intermediate_state_per_verified_token(catalog):
    """MTP at K = 3 verifies n = 4 tokens: each slot holds 1 + 4 states, so ⌊… / (5 · state)⌋
    slots; the 48 running requests when speculating are within slots // 3, and both pools'
    tokens grow by 48 · 3 · 1 + 48 · 4 + 100 = 436."""
    result = spec(catalog, "qwen3-next-80b-a3b", "b200", tp=8, draft="qwen3-next-80b-a3b-mtp")
    assert (result.draft_k, result.num_draft_tokens) == (3, 4)
    slot = STATE_FP32 * (1 + 4)
    slots = math.floor(rest(result) * RATIO / (1 + RATIO) / slot)
    tokens = math.floor((rest(result) - slots * slot) / CELL) + 48 * 3 * 1 + 48 * 4 + 100
    assert (result.max_mamba_cache_size, result.mamba_pool_bytes) == (slots, slots * slot)
    assert result.max_total_num_tokens == tokens and result.max_running_requests == 48


def test_a_small_gpus_state_slots_bound_the_running_requests_and_the_users_setting(catalog):
    """Qwen3.5-0.8B on an RTX 4090: 18 linear layers of 16 key and 16 value heads of 128 hold
    18 · ((16 · 128 + 2 · 16 · 128) · 3 · 2 + 16 · 128 · 128 · 4) = 19,537,920 bytes a request;
    the state pool's slots // 3 is below the pool's 2048 request slots, and SGLang caps a
    --max-running-requests of 1000 at it too."""
    state = 18 * ((16 * 128 + 2 * 16 * 128) * 3 * 2 + 16 * 128 * 128 * 4)
    result = spec(catalog, "qwen3.5-0.8b", "rtx-4090")
    free = 25_286_410_240 - round(0.55 * GIB)
    slots = math.floor(
        (free * result.mem_fraction_static - result.target.weights_bytes) * 0.9 / 1.9 / state
    )
    assert result.max_mamba_cache_size == slots and result.max_running_requests == slots // 3
    assert result.max_running_requests < 2048
    capped = spec(catalog, "qwen3.5-0.8b", "rtx-4090", max_running_requests=1000)
    assert capped.max_running_requests == slots // 3
    fewer = spec(catalog, "qwen3.5-0.8b", "rtx-4090", max_running_requests=100)
    assert fewer.max_running_requests == 100


def test_a_batch_fits_only_where_each_pool_holds_its_share(catalog):
    """The KV pool holds tokens, the state pool one slot a sequence: at batch 100 a context of
    ⌊tokens / 100⌋ fits and one more token does not, though the state pool has room to spare;
    at one token of context, as many sequences as slots fit and one more does not."""
    dep, engine = qwen3_next(catalog)
    one = deployment_memory(dep.numbers, engine, 1, 1, 0)
    assert one.pool is not None and one.pool.state_slots is not None
    tokens, slots = float(one.pool.kv_pool_tokens), float(one.pool.state_slots)
    longest = math.floor(tokens / 100)
    fits = deployment_memory(dep.numbers, engine, [longest, longest + 1], 100, 0).fits
    assert fits.tolist() == [True, False]
    many = deployment_memory(dep.numbers, engine, 1, [slots, slots + 1], 0).fits
    assert many.tolist() == [True, False]
    # the batch holds its tokens' KV and its states: what the panel shows as its memory
    memory = deployment_memory(dep.numbers, engine, 1000, 100, 0)
    assert float(memory.target_kv) == 100 * (1000 * CELL + STATE_FP32)


def test_the_served_replica_reads_and_writes_float32_states_beside_its_kv_pool(catalog):
    """The simulator's sequences take only KV tokens from the KV pool (their states lie in the
    state pool), each step moves every state twice at float32, and at most slots // 3 run."""
    dep, engine = qwen3_next(catalog)
    served = replica(dep.numbers, engine, 0)
    pool = deployment_memory(dep.numbers, engine, 1, 1, 0).pool
    assert pool is not None and pool.state_slots is not None and pool.max_running is not None
    assert served.pool_kv.state_bytes_per_sequence == 0.0
    assert served.pool_kv.full_bytes_per_token == CELL
    assert served.target_kv.state_bytes_per_sequence == 2 * STATE_FP32
    assert served.kv_capacity_bytes == float(pool.kv_pool)
    assert served.max_num_seqs == min(int(pool.max_running), served.max_num_batched_tokens)
    assert int(pool.max_running) == int(pool.state_slots) // 3
    vllm_dep, _ = qwen3_next(catalog, engine="vllm")
    assert step_traffic(vllm_dep.numbers.target.kv).state_bytes_per_sequence == 2 * STATE_BF16


def test_a_sweep_row_holds_the_states_as_spec_does(runner, tmp_path):
    """The sweep resolves its sides with the engine's state dtype: its pool is spec's."""
    row = best_pair_row(
        tmp_path,
        "targets: [qwen3.5-0.8b]\ndrafts: [ngram]\ngpus: [rtx-4090]\ncontext_lengths: [2048]\n"
        "batch_sizes: [4]\nacceptance_rates: [0.7]\ndraft_k: [3]\nengine: sglang\n"
        "mamba_ssm_dtype: bfloat16\n",
    )
    args = ["spec", "--target", "qwen3.5-0.8b", "--draft", "ngram", "--gpu", "rtx-4090"]
    result = runner.invoke(
        app,
        [
            *args,
            *("--engine", "sglang", "--mamba-ssm-dtype", "bfloat16", "--acceptance-rate", "0.7"),
            *("--draft-k", "3", "--context-length", "2048", "--batch-size", "4", "--json"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert '"mamba_ssm_dtype": "bfloat16"' in result.stdout
    assert f'"kv_pool_tokens": {row["kv_pool_tokens"]},' in result.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--engine", "sglang", "--mamba-ssm-dtype", "float16"],
            "error: unknown mamba_ssm_dtype 'float16': did you mean 'bfloat16', 'float32'?",
        ),
        (
            ["--engine", "sglang", "--mamba-ssm-dtype", "fp8"],
            "error: unknown mamba_ssm_dtype 'fp8': choose float32, bfloat16",
        ),
        (
            ["--engine", "vllm", "--mamba-ssm-dtype", "bfloat16"],
            "error: --mamba-ssm-dtype is a setting of sglang: it does not apply to engine vllm",
        ),
    ],
)
def test_a_state_dtype_sglang_does_not_take_is_one_line_and_exit_2(runner, extra, message):
    args = ["spec", "--target", "qwen3.5-0.8b", "--draft", "none", "--gpu", "rtx-4090"]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 2
    assert result.stderr == message + "\n"


CAPACITY_ASK = ["capacity", "--request-rate", "1", "--input-tokens", "100", "--output-tokens", "99"]


@pytest.mark.parametrize("command", [["spec"], CAPACITY_ASK])
def test_a_state_dtype_for_a_model_without_linear_attention_is_one_line_and_exit_2(runner, command):
    """Llama-3.1-8B has no linear-attention layer: the setting would change nothing."""
    args = ["--target", "llama-3.1-8b", "--draft", "none", "--gpu", "h100", "--engine", "sglang"]
    result = runner.invoke(app, [*command, *args, "--mamba-ssm-dtype", "bfloat16"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --mamba-ssm-dtype applies to models with linear-attention layers: "
        "llama-3.1-8b has none\n"
    )


def test_the_state_dtypes_are_sglangs_and_the_catalogs(catalog):
    """MAMBA_SSM_DTYPE_CHOICES = ["float32", "bfloat16"] (server_args.py), each a KV dtype of
    the precision catalog by that name, as float16 is (a model config may name it from 0.5.9);
    the presets default to float32 (0.5.9's to None, as its ServerArgs: the model config's,
    tests/test_sglang_059.py) and a 0.9 ratio."""
    assert ENGINE_KNOBS["mamba_ssm_dtype"].choices == ("float32", "bfloat16")
    names = ("float32", "bfloat16", "float16")
    assert [catalog.kv_dtype(name).bytes_per_element for name in names] == [4, 2, 2]
    for name, dtype in (("sglang", "float32"), ("sglang-0.4", "float32"), ("sglang-0.5.9", None)):
        engine = get_engine(name)
        assert (engine.mamba_ssm_dtype, engine.mamba_full_memory_ratio) == (dtype, 0.9)
    for name in ("vllm", "vllm-0.15", "trtllm", "plain"):
        engine = get_engine(name)
        assert (engine.mamba_ssm_dtype, engine.mamba_full_memory_ratio) == (None, None)


@given(
    rest_gib=st.floats(0.0, 200.0),
    state_mib=st.floats(0.01, 100.0),
    cell_kib=st.floats(1.0, 512.0),
    draft_tokens=st.integers(0, 8),
    dp_ranks=st.sampled_from([1, 2, 8]),
)
def test_the_two_pools_share_the_rest_at_sglangs_ratio(
    rest_gib, state_mib, cell_kib, draft_tokens, dp_ranks
):
    """Whatever the rest, state and cell: the state pool holds at most r / (1 + r) of the rest
    over the data-parallel ranks and less than one slot short of it, and the KV pool fits
    in what the state pool leaves."""
    engine = get_engine("sglang")
    rest_bytes, cell = rest_gib * GIB, cell_kib * 1024
    slot = float(sglang_pool.state_slot_bytes(engine, state_mib * 2**20, draft_tokens))
    slots = float(sglang_pool.state_slots(engine, rest_bytes, slot, dp_ranks))
    share = rest_bytes * RATIO / (1 + RATIO) / dp_ranks
    pool = float(sglang_pool.state_pool_bytes(slots, slot))
    assert pool <= share * (1 + 1e-12) and pool > share - slot * (1 + 1e-9)
    tokens = float(sglang_pool.profiled_tokens(rest_bytes - pool, cell))
    assert 0 <= tokens * cell + pool <= rest_bytes * (1 + 1e-12)
    running = float(sglang_pool.running_requests(engine, tokens, 262_144, 0.0, slots))
    assert running <= slots // 3
    none = sglang_pool.state_slots(engine, rest_bytes, 0.0, dp_ranks)
    assert np.isinf(none) and float(sglang_pool.state_pool_bytes(none, 0.0)) == 0.0
