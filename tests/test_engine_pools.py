"""SGLang's and TensorRT-LLM's KV pools (core/sglang_pool.py, core/trtllm_pool.py) through the
path `infersize spec` runs, each against a hand computation from the engine's rule; their
defaults by release and GPU; a draft's pool and the speculative headroom. The public start-up
logs they are checked against are rows of tests/data/measurements.csv
(tests/test_calibration.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infersize.core.engines import EngineSettings, configure_engine, get_engine
from infersize.core.memory import GIB
from infersize.core.sglang_pool import (
    cuda_graph_max_bs,
    default_chunked_prefill,
    default_mem_fraction,
)
from infersize.core.trtllm_pool import logged_tokens
from infersize.errors import ValueRangeError
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
from infersize.service.spec import run_spec

MIB = 2**20


def spec(catalog, engine: EngineSettings, draft: str | None = None, **deployment):
    deployment = {"target": "llama-3.1-8b", "gpu": "h100", "draft": draft} | deployment
    return run_spec(
        SpecRequest(
            deployment=DeploymentRequest(**deployment),
            engine=engine,
            acceptance_rate=0.7 if draft else None,
        ),
        catalog,
    )


def test_sglangs_pool_is_its_share_of_the_free_memory_less_the_weights(catalog):
    """max_total_num_tokens = ⌊(M_start · mem_fraction_static − W) / cell⌋: an H100 of
    85,029,027,840 bytes, 0.55 GiB not free at start (the CUDA context), 0.88, Llama-3.1-8B's
    16,060,522,496 bytes of bf16 weights and 131,072 bytes of KV per token (32 layers · 8 KV
    heads · 128 · 2 · 2 bytes)."""
    result = spec(catalog, EngineSettings(engine="sglang-0.4"))
    free = 85_029_027_840 - round(0.55 * GIB)
    expected = math.floor((free * 0.88 - 16_060_522_496) / 131_072)
    assert result.max_total_num_tokens == expected == result.kv_pool_tokens
    assert result.mem_fraction_static == 0.88 and result.engine_release == "0.4.4"
    assert result.kv_pool_bytes == expected * 131_072
    # not speculating: min(pool / 2, request slots min(max(pool · 512 / 131,072, 2048), 4096))
    assert result.max_running_requests == 2048


@pytest.mark.parametrize(("tp", "fraction"), [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81)])
def test_sglang_0_4_sets_its_fraction_by_tensor_parallelism(tp, fraction):
    """ServerArgs.__post_init__ (0.4.0): 0.88 at TP 1, 0.87 at 2, 0.85 at 4, 0.81 at 8."""
    engine = get_engine("sglang-0.4")
    assert float(default_mem_fraction(engine, 80 * GIB, tp, 8192, 0.0)) == fraction


@pytest.mark.parametrize(
    ("memory_mib", "tp", "drafter_mib", "fraction"),
    [
        # H100 (81,090 MiB as CUDA reports it; SGLang reads nvidia-smi's 81,559, which gives
        # 0.835): 512 + 1.5 · 8192 + 2 · 256 + 1024 · 1/8 = 13,440 MiB reserved
        (81_090, 1, 0, round((81_090 - 13_440) / 81_090, 3)),
        (81_090, 1, 2048, round((81_090 - 15_488) / 81_090, 3)),  # + 2 GiB for an EAGLE head
        (81_090, 1, 6144, round((81_090 - 19_584) / 81_090, 3)),  # + 6 GiB for a draft model
        # H200 at TP 8: 512 + 12,288 + 2 · 512 + 1024 = 14,848 MiB
        (143_165, 8, 0, round((143_165 - 14_848) / 143_165, 3)),
        # RTX 4090: chunked prefill 2048, graphs to 24: 512 + 3072 + 48 + 128 = 3760 MiB
        (24_115, 1, 0, round((24_115 - 3760) / 24_115, 3)),
    ],
)
def test_sglang_0_5_reserves_memory_for_activations_graphs_and_drafts(
    memory_mib, tp, drafter_mib, fraction
):
    """ServerArgs._handle_gpu_memory_settings (0.5.6): at least 10 GiB above 60 GiB."""
    engine = get_engine("sglang")
    memory = memory_mib * MIB
    chunked = float(default_chunked_prefill(engine, memory))
    assert float(default_mem_fraction(engine, memory, tp, chunked, drafter_mib)) == fraction


@pytest.mark.parametrize(
    ("gpu", "release", "chunk"),
    [
        ("rtx-4090", "sglang", 2048),
        ("l40s", "sglang", 4096),
        ("h100", "sglang", 8192),
        ("b200", "sglang", 16384),
        ("rtx-4090", "sglang-0.4", 2048),
        ("b200", "sglang-0.4", 8192),
    ],
)
def test_sglangs_chunked_prefill_by_gpu(catalog, gpu, release, chunk):
    memory = catalog.gpu(gpu).memory_bytes
    assert float(default_chunked_prefill(get_engine(release), memory)) == chunk


@pytest.mark.parametrize(
    ("gpu", "tp", "largest"),
    [
        ("mi300x", 8, 512),  # the cookbook's Llama-4 rows: 92-110 running decode in graphs
        ("b200", 8, 512),
        ("h100", 1, 256),
        ("h100", 8, 512),
        ("l40s", 1, 32),
        ("l40s", 4, 160),
        ("rtx-4090", 1, 24),
        ("rtx-4090", 4, 80),
    ],
)
def test_sglangs_largest_graphed_decode_batch_by_gpu_and_tp(catalog, gpu, tp, largest):
    """ServerArgs._handle_gpu_memory_settings (0.5.6, unchanged in the 0.5.7-era
    sgl-project/sglang@3d51ae18a18e72eba75fd90573a2e48d82eee544): 512 from 160 GiB ("B200,
    MI300") at any TP."""
    assert float(cuda_graph_max_bs(catalog.gpu(gpu).memory_bytes, tp)) == largest


def test_a_sglang_draft_keeps_a_pool_of_as_many_tokens_grown_by_a_steps_slots(catalog):
    """With a draft both pools grow by R · K · topk + R · (K + 1) + 100 tokens (R = 48 running
    requests when speculating): 48 · 4 + 48 · 5 + 100 = 532 at K = 4. The draft's pool holds
    as many tokens over its own layers (the EAGLE-3 head: one layer, 8 KV heads)."""
    settings = EngineSettings(engine="sglang", mem_fraction_static=0.8)
    alone = spec(catalog, settings)
    paired = spec(catalog, settings, draft="eagle3-llama3.1-8b")
    assert paired.max_total_num_tokens == alone.max_total_num_tokens + 532
    assert paired.max_running_requests == 48
    head_cell = 1 * 8 * 128 * 2 * 2
    assert paired.kv_pool_bytes == paired.max_total_num_tokens * (131_072 + head_cell)


def test_ngram_lookup_keeps_no_pool_and_no_headroom(catalog):
    """NGRAM drafts on the CPU: no draft pool, no headroom, no reserve, but SGLang still runs
    at most 48 requests when speculating."""
    settings = EngineSettings(engine="sglang", mem_fraction_static=0.8)
    alone = spec(catalog, settings)
    ngram = spec(catalog, settings, draft="ngram")
    assert ngram.max_total_num_tokens == alone.max_total_num_tokens
    assert ngram.kv_pool_bytes == alone.kv_pool_bytes
    assert (alone.max_running_requests, ngram.max_running_requests) == (2048, 48)
    default = spec(catalog, EngineSettings(engine="sglang"), draft="ngram")
    assert (
        default.mem_fraction_static
        == spec(catalog, EngineSettings(engine="sglang")).mem_fraction_static
    )


def test_a_draft_that_does_not_fit_what_sglang_leaves_is_out_of_memory(catalog):
    """mem_fraction_static 0.99 leaves 0.8 GiB: not the 8B draft's weights and pool."""
    settings = EngineSettings(engine="sglang", mem_fraction_static=0.99)
    result = spec(catalog, settings, draft="llama-3.1-8b", target="llama-3.1-8b")
    assert result.verdict == "OOM" and not result.fits


def test_tensorrt_llms_cache_is_its_fraction_of_what_the_profiled_prefill_leaves(catalog):
    """KV = 0.9 · (M − W − A − N): A the prefill of 8192 tokens at the activation factor 2.5
    (86,016 bytes per token of Llama-3.1-8B: 2 · 4096 + 6144 q/k/v + 2 · 14,336, at 2 bytes),
    N = 0.6 GiB outside torch; tokens in whole 32-token blocks."""
    result = spec(catalog, EngineSettings(engine="trtllm"))
    peak = 16_060_522_496 + 2.5 * 8192 * 86_016 + round(0.6 * GIB)
    tokens = math.floor(0.9 * (85_029_027_840 - peak) / 131_072)
    assert result.kv_pool_bytes == tokens * 131_072
    assert result.max_tokens_in_paged_kv_cache == math.ceil(tokens / 32) * 32
    assert (result.max_num_tokens, result.max_batch_size) == (8192, 2048)
    assert result.kv_cache_free_gpu_memory_fraction == 0.9


def test_tensorrt_llm_logs_its_tokens_in_whole_blocks():
    """The DGX Spark log of GPT-OSS-120B (73,728 bytes per token): 'max_tokens ... 86711' then
    'Allocated 5.95 GiB for max tokens in paged KV cache (86720)'."""
    engine = get_engine("trtllm")
    assert float(logged_tokens(engine, 86_711 * 73_728 + 100, 73_728)) == 86_720


def test_a_tensorrt_llm_draft_divides_the_cache_with_the_target(catalog):
    """Two-model drafts: tokens = KV / (target's + draft's bytes per token), each model a pool
    of that many tokens (Llama-3.2-1B: 16 layers · 8 · 64 · 2 · 2 = 32,768 bytes)."""
    result = spec(catalog, EngineSettings(engine="trtllm"), draft="llama-3.2-1b")
    tokens = math.floor(result.kv_pool_bytes / (131_072 + 32_768))
    assert result.max_tokens_in_paged_kv_cache == math.ceil(tokens / 32) * 32


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            EngineSettings(engine="vllm", mem_fraction_static=0.8),
            "{mem_fraction_static} is a setting of sglang: it does not apply to engine vllm",
        ),
        (
            EngineSettings(engine="sglang", max_batch_size=8),
            "{max_batch_size} is a setting of trtllm: it does not apply to engine sglang",
        ),
        (
            EngineSettings(engine="trtllm", kv_cache_free_gpu_memory_fraction=1.5),
            "{kv_cache_free_gpu_memory_fraction} must be in (0, 1], got 1.5",
        ),
        (
            EngineSettings(engine="sglang", chunked_prefill_size=0),
            "{chunked_prefill_size} must be in 1..16,777,216 tokens, got 0",
        ),
    ],
)
def test_an_engines_settings_are_checked_and_refused_elsewhere(settings, message):
    with pytest.raises(ValueRangeError) as raised:
        configure_engine(settings)
    assert raised.value.message == message


def test_every_pool_rule_gives_one_token_count_per_gpu_and_setting(catalog):
    """The same deployment under each engine: a pool, its tokens as logged, and a batch limit."""
    for name in ("vllm", "sglang", "sglang-0.4", "sglang-0.5.9", "trtllm"):
        result = spec(catalog, EngineSettings(engine=name))
        assert result.kv_pool_tokens is not None and result.kv_pool_tokens > 100_000, name
        assert np.isfinite(result.max_concurrent_sequences or np.nan), name
