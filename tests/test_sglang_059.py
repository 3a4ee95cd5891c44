"""The `sglang-0.5.9` preset: SGLang 0.5.9's pools beside 0.5.6's (`sglang`), each number
derived here from the source of the main of 2026-02-16
(sgl-project/sglang@f9c3def7fe464a19d8321474a4e149a3a8d3dcc4, whose files these rules read are
release 0.5.9's):

- python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py, `handle_max_mamba_cache`:
  with a drafter, mamba_cache_per_req · max_running_requests · speculative_num_draft_tokens
  comes out of the rest first; with the radix cache off the state pool holds
  max_running_requests slots of one state each, else ⌊rest · 0.9 / 1.9 / state⌋;
  `init_memory_pool`: the request slots are at most max_mamba_cache_size // ratio, ratio 1 with
  the radix cache off (else 3 + 0: no extra buffer), and draft_runner_cache_size is the
  target's token count as profiled (no R · d · k + R · n + 100).
- python/sglang/srt/server_args.py: mamba_scheduler_strategy "auto" becomes "no_buffer", under
  which `_handle_mamba_radix_cache` turns the radix cache off for Qwen3-Next and Qwen3.5 when
  speculating; `_handle_speculative_decoding` sets max_running_requests 48.
- python/sglang/srt/configs/mamba_utils.py: the state is the conv window (bfloat16) and the
  temporal state at the config's mamba_ssm_dtype (float32 for Qwen3.5) of every linear layer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersize.cli import app
from infersize.core import sglang_pool
from infersize.core.engines import EngineSettings, configure_engine, get_engine
from infersize.core.memory import GIB
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
from infersize.service.spec import run_spec
from tests.support.sweeps import best_pair_row

# Qwen3.5-397B-A17B at TP 8: 45 Gated DeltaNet layers of 16 key and 64 value heads of 128,
# kernel 4 (conv_dim 64 · 128 + 2 · 16 · 128 = 12,288 channels, 1,536 a rank, 3 positions of
# bfloat16; a temporal state of 64 / 8 heads of 128 × 128 in float32), and 15 full-attention
# layers of 2 KV heads of 256 (one a rank), K and V in bfloat16
STATE = 45 * ((64 * 128 + 2 * 16 * 128) // 8 * 3 * 2 + 64 // 8 * 128 * 128 * 4)  # 24,007,680
CELL = 15 * 1 * 256 * 2 * 2  # 15,360 bytes a token
VERIFIED = 4  # MTP as a chain of K = 3 verifies K + 1 tokens (speculative_num_draft_tokens)
RATIO = 0.9  # mamba_full_memory_ratio


def qwen35(catalog, engine: str, draft: bool = True, **settings):
    """The sgl-cookbook rows' deployment: 8 x H200 at mem_fraction_static 0.8, MTP at K = 3."""
    request = SpecRequest(
        deployment=DeploymentRequest(
            target="qwen3.5-397b-a17b",
            gpu="h200-sxm",
            tp=8,
            draft="qwen3.5-397b-a17b-mtp" if draft else None,
        ),
        engine=EngineSettings(engine=engine, mem_fraction_static=0.8, **settings),
        acceptance_rate=0.7 if draft else None,
        draft_k=3,
        context_length=1000,
        batch_size=1,
    )
    return run_spec(request, catalog)


def rest(catalog, result) -> float:
    """M_start · 0.8 − W: the H200 less the 0.55 + 1.7 GiB not free at start."""
    free = catalog.gpu("h200-sxm").memory_bytes - round((0.55 + 1.7) * GIB)
    return free * 0.8 - result.target.weights_bytes


def test_qwen35_with_mtp_runs_48_requests_under_0_5_9_where_0_5_6_runs_a_third_of_its_slots(
    catalog,
):
    """0.5.9: 48 slots of one state and 48 · 4 intermediate states reserved (48 · 5 states in
    all), the KV pool the rest, and all 48 run. 0.5.6: ⌊rest · 0.9 / 1.9 / (5 · state)⌋ slots
    of five states, a third of them run, and the pool grows by R · 3 · 1 + R · 4 + 100."""
    new = qwen35(catalog, "sglang-0.5.9")
    pool = 48 * STATE + 48 * VERIFIED * STATE
    assert (new.max_mamba_cache_size, new.mamba_pool_bytes) == (48, pool)
    assert new.max_total_num_tokens == math.floor((rest(catalog, new) - pool) / CELL)
    assert new.max_running_requests == 48 and new.mamba_ssm_dtype == "float32"
    old = qwen35(catalog, "sglang")
    slots = math.floor(rest(catalog, old) * RATIO / (1 + RATIO) / (5 * STATE))
    running = slots // 3
    grown = running * 3 * 1 + running * VERIFIED + 100
    assert (old.max_mamba_cache_size, old.max_running_requests) == (slots, running)
    assert (
        old.max_total_num_tokens
        == math.floor((rest(catalog, old) - slots * 5 * STATE) / CELL) + grown
    )
    assert running < 48


def test_the_users_running_requests_size_the_slots_and_the_reserve(catalog):
    """--max-running-requests 100 under 0.5.9: 100 slots and 100 · 4 intermediate states, and
    all 100 run."""
    result = qwen35(catalog, "sglang-0.5.9", max_running_requests=100)
    pool = 100 * (1 + VERIFIED) * STATE
    assert (result.max_mamba_cache_size, result.mamba_pool_bytes) == (100, pool)
    assert result.max_running_requests == 100
    assert result.max_total_num_tokens == math.floor((rest(catalog, result) - pool) / CELL)


def test_without_a_drafter_0_5_9_splits_the_rest_as_0_5_6_does(catalog):
    """No drafter: no reserve, the radix cache on, the 0.9 : 1 split and a third of the slots."""
    new, old = (qwen35(catalog, engine, draft=False) for engine in ("sglang-0.5.9", "sglang"))
    slots = math.floor(rest(catalog, new) * RATIO / (1 + RATIO) / STATE)
    assert new.max_mamba_cache_size == old.max_mamba_cache_size == slots
    assert new.max_running_requests == old.max_running_requests == slots // 3
    assert new.max_total_num_tokens == old.max_total_num_tokens


def test_a_draft_pool_holds_the_targets_tokens_without_the_headroom(catalog):
    """Llama-3.1-8B with its EAGLE-3 head on an H100: 0.5.6 grows both pools by 48 · 4 + 48 · 5
    + 100 = 532 tokens at K = 4; 0.5.9 keeps the target's count."""

    def tokens(engine: str, draft: str | None) -> int | None:
        request = SpecRequest(
            deployment=DeploymentRequest(target="llama-3.1-8b", gpu="h100", draft=draft),
            engine=EngineSettings(engine=engine, mem_fraction_static=0.8),
            acceptance_rate=0.7 if draft else None,
        )
        return run_spec(request, catalog).max_total_num_tokens

    alone = tokens("sglang-0.5.9", None)
    assert alone == tokens("sglang", None)
    assert tokens("sglang-0.5.9", "eagle3-llama3.1-8b") == alone
    assert tokens("sglang", "eagle3-llama3.1-8b") == alone + 532


@given(
    rest_gib=st.floats(0.0, 200.0),
    state_mib=st.floats(0.01, 100.0),
    cell_kib=st.floats(1.0, 512.0),
    draft_tokens=st.integers(1, 8),
    running=st.integers(1, 512),
    dp_ranks=st.sampled_from([1, 2, 8]),
)
def test_a_drafter_takes_one_slot_and_its_verify_states_per_running_request(
    rest_gib, state_mib, cell_kib, draft_tokens, running, dp_ranks
):
    """Whatever the rest, state, cell and setting: with a drafter the state pool is R // DP
    ranks requests of (1 + n) states, all of them run, and the KV pool fits in what it leaves."""
    engine = configure_engine(EngineSettings(engine="sglang-0.5.9", max_running_requests=running))
    rest_bytes, state, cell = rest_gib * GIB, state_mib * 2**20, cell_kib * 1024
    pool = sglang_pool.state_pool(engine, rest_bytes, state, draft_tokens, dp_ranks)
    requests = running // dp_ranks
    assert float(pool.slots) == requests
    assert float(pool.pool_bytes) == requests * state + state * requests * draft_tokens
    assert float(pool.request_bytes) == state * (1 + draft_tokens)
    tokens = float(sglang_pool.profiled_tokens(rest_bytes - pool.pool_bytes, cell))
    assert tokens * cell + float(pool.pool_bytes) <= rest_bytes * (1 + 1e-12)
    runs = sglang_pool.running_requests(engine, max(tokens, 0.0), 262_144, 1.0, pool.slots)
    assert float(runs) == min(running, requests)


@given(
    rest_gib=st.floats(0.0, 200.0),
    state_mib=st.floats(0.01, 100.0),
    dp_ranks=st.sampled_from([1, 2, 8]),
)
def test_without_a_drafter_only_0_5_6_splits_the_slots_over_dp_ranks(rest_gib, state_mib, dp_ranks):
    """handle_max_mamba_cache @0.5.6 divides the ratio's slots by the DP ranks for Qwen3-Next;
    @0.5.9 the ratio's slots stand as computed."""
    rest_bytes, state = rest_gib * GIB, state_mib * 2**20
    new = sglang_pool.state_pool(get_engine("sglang-0.5.9"), rest_bytes, state, 0, dp_ranks)
    old = sglang_pool.state_pool(get_engine("sglang"), rest_bytes, state, 0, dp_ranks)
    slots = math.floor(rest_bytes * RATIO / (1 + RATIO) / state)
    assert (float(new.slots), float(old.slots)) == (slots, slots // dp_ranks)
    assert float(new.pool_bytes) == slots * state


SPEC = [
    "spec",
    *("--target", "qwen3.5-397b-a17b", "--draft", "qwen3.5-397b-a17b-mtp"),
    *("--gpu", "h200-sxm", "--tp", "8", "--engine", "sglang-0.5.9"),
    *("--mem-fraction-static", "0.8", "--draft-k", "3", "--acceptance-rate", "0.7"),
]


def test_spec_logs_the_pools_as_sglang_0_5_9_does(runner):
    result = runner.invoke(app, [*SPEC, "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["engine"], data["engine_release"]) == ("sglang-0.5.9", "0.5.9")
    assert (data["max_mamba_cache_size"], data["max_running_requests"]) == (48, 48)
    assert data["mamba_pool_bytes"] == 48 * 5 * STATE
    panel = " ".join(runner.invoke(app, SPEC).stdout.split())
    assert "SGLang 0.5.9 rules, mem_fraction_static 0.8 of the free memory" in panel
    gib = 48 * 5 * STATE / GIB
    line = f"Mamba Cache is allocated: max_mamba_cache_size: 48 ({gib:.2f} GiB per GPU; ssm state"
    assert line + " float32)" in panel
    tokens = data["max_total_num_tokens"]
    assert f"KV Cache is allocated: #tokens: {tokens:,}" in panel
    assert "max_running_requests 48" in panel


def test_a_sweep_row_under_sglang_0_5_9_equals_spec_at_its_cell(runner, tmp_path):
    """Qwen3.5-0.8B with its MTP module on an RTX 4090 at K = 3: the sweep's pool is spec's."""
    row = best_pair_row(
        tmp_path,
        "targets: [qwen3.5-0.8b]\ndrafts: [qwen3.5-0.8b-mtp]\ngpus: [rtx-4090]\n"
        "context_lengths: [2048]\nbatch_sizes: [4]\nacceptance_rates: [0.7]\ndraft_k: [3]\n"
        "engine: sglang-0.5.9\n",
    )
    assert row["engine"] == "sglang-0.5.9"
    args = ["spec", "--target", "qwen3.5-0.8b", "--draft", "qwen3.5-0.8b-mtp"]
    result = runner.invoke(
        app,
        [
            *args,
            *("--gpu", "rtx-4090", "--engine", "sglang-0.5.9", "--acceptance-rate", "0.7"),
            *("--draft-k", "3", "--context-length", "2048", "--batch-size", "4", "--json"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kv_pool_tokens"] == row["kv_pool_tokens"]
    assert (data["max_mamba_cache_size"], data["max_running_requests"]) == (48, 48)


# Qwen3-Next-80B-A3B's config (tests/data/configs/, as a user's checkpoint folder holds it) at
# TP 8: 36 Gated DeltaNet layers of 16 key and 32 value heads of 128, kernel 4 (conv_dim 8,192,
# 1,024 a rank, 3 positions of bfloat16) and a temporal state of 32 / 8 heads of 128 x 128
NEXT_STATE = {
    "float32": 36 * (8192 // 8 * 3 * 2 + 32 // 8 * 128 * 128 * 4),  # 9,658,368 bytes
    "bfloat16": 36 * (8192 // 8 * 3 * 2 + 32 // 8 * 128 * 128 * 2),  # 4,939,776 bytes
}


def _checkpoint(tmp_path, ssm_dtype: str | None) -> str:
    """A checkpoint folder holding Qwen3-Next's config.json, naming `ssm_dtype` (or none)."""
    fixture = Path(__file__).parent / "data" / "configs" / "qwen3-next-80b-a3b-instruct.json"
    config = json.loads(fixture.read_text())["config"]
    if ssm_dtype is not None:
        config["mamba_ssm_dtype"] = ssm_dtype
    folder = tmp_path / f"qwen3-next-{ssm_dtype}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.mark.parametrize(
    ("named", "engine", "flag", "held"),
    [
        ("bfloat16", "sglang-0.5.9", None, "bfloat16"),  # mamba2_state_dtype: the config's
        (None, "sglang-0.5.9", None, "float32"),  # none named: float32
        ("float8", "sglang-0.5.9", None, "float32"),  # not one SGLang takes: it warns, float32
        ("bfloat16", "sglang-0.5.9", "float32", "float32"),  # --mamba-ssm-dtype wins
        ("bfloat16", "sglang", None, "float32"),  # 0.5.6: ServerArgs' float32, the config unread
    ],
)
def test_0_5_9_holds_the_states_at_the_dtype_the_models_config_names(
    runner, tmp_path, named, engine, flag, held
):
    """SGLang 0.5.9's mamba2_state_dtype (python/sglang/srt/configs/mamba_utils.py at the
    commit above): float32, unless the model's config (or its text_config) names
    float32, bfloat16 or float16, unless --mamba-ssm-dtype (the environment it sets) does.
    The pool's slots are each one request's state at that dtype: ⌊pool / state⌋."""
    command = ["spec", "--target", _checkpoint(tmp_path, named), "--gpu", "b200", "--tp", "8"]
    command += ["--draft", "none", "--engine", engine, "--json"]
    if flag is not None:
        command += ["--mamba-ssm-dtype", flag]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["mamba_ssm_dtype"] == held
    slots, pool = data["max_mamba_cache_size"], data["mamba_pool_bytes"]
    assert slots == pool // NEXT_STATE[held]
