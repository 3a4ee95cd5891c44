"""SGLang's pools for DeepSeek-R1 (FP8, MLA) at TP 4 on B200s, with and without its MTP head,
each against a hand computation from SGLang 0.5.6's source (core/sglang_pool.py cites it):

  max_total_num_tokens = ⌊(M · mem_fraction_static − W) / cell⌋ (+ the speculative headroom)

M the memory free at start (the B200's 191,502,483,456 bytes less 0.55 + 1.7 GiB at TP > 1),
W the target's weights per GPU, cell (512 + 64) · 61 layers · 2 bytes = 70,272 bytes per token:
an MLA latent is held whole on every rank, not split by TP."""

from __future__ import annotations

import math

import pytest

from infersize.core.engines import EngineSettings, get_engine
from infersize.core.memory import GIB
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest, resolve_deployment
from infersize.service.spec import run_spec

B200 = 191_502_483_456  # configs/gpus.yaml: torch total_memory, 178.35 GiB
FREE = B200 - round((0.55 + 1.7) * GIB)  # not free at start: CUDA context, NCCL
MIB = 2**20
CELL = (512 + 64) * 61 * 2  # kv_lora_rank + qk_rope_head_dim, 61 layers, bf16
MTP_CELL = (512 + 64) * 1 * 2  # the NextN module's one MLA layer


def r1(catalog, fraction: float | None = None, mtp: bool = False):
    deployment = DeploymentRequest(
        target="deepseek-r1", gpu="b200", tp=4, method="mtp" if mtp else None
    )
    engine = EngineSettings(engine="sglang", mem_fraction_static=fraction)
    if not mtp:
        return run_spec(SpecRequest(deployment=deployment, engine=engine), catalog)
    request = SpecRequest(deployment=deployment, acceptance_rate=0.8, draft_k=3, engine=engine)
    return run_spec(request, catalog)


def test_the_default_fraction_is_what_is_left_after_sglangs_reserve(catalog):
    """ServerArgs._handle_gpu_memory_settings (0.5.6), a GPU of 160 GiB or more: chunked prefill
    16,384, graphs to batch 512: 512 + 1.5 · 16,384 + 2 · 512 + 1024 · 4 / 8 = 26,624 MiB
    reserved, 2,048 more for an EAGLE-family head (NEXTN)."""
    gpu = B200 / MIB
    assert r1(catalog).mem_fraction_static == round((gpu - 26_624) / gpu, 3) == 0.854
    assert r1(catalog, mtp=True).mem_fraction_static == round((gpu - 28_672) / gpu, 3) == 0.843


@pytest.mark.parametrize("mtp", [False, True])
def test_at_the_default_fraction_the_weights_leave_no_pool_and_sglang_refuses(catalog, mtp):
    """R1's FP8 weights are 156.8 GiB per GPU at TP 4, more than 0.854 (0.843) of the 176.1
    GiB free: profile_max_num_token is negative, the headroom does not lift it, and
    init_memory_pool stops with "Not enough memory" (0.5.6). The note names the fraction from
    which there is a pool: ⌈W / M⌉ to three decimals, 0.891."""
    result = r1(catalog, mtp=mtp)
    weights = result.target.weights_bytes
    assert weights > (result.mem_fraction_static or 0) * FREE
    assert result.max_total_num_tokens == 0 and not result.fits
    least = math.ceil(weights / FREE * 1000) / 1000
    assert least == 0.891
    assert any(
        "SGLang refuses to start" in n and f"--mem-fraction-static {least:g}" in n
        for n in result.notes
    )


def test_at_a_fraction_that_holds_the_weights_the_pool_is_positive(catalog):
    """--mem-fraction-static 0.93: ⌊(M · 0.93 − W) / 70,272⌋ tokens."""
    result = r1(catalog, 0.93)
    weights = result.target.weights_bytes
    expected = math.floor((FREE * 0.93 - weights) / CELL)
    assert result.max_total_num_tokens == expected > 100_000
    assert result.kv_pool_bytes == expected * CELL
    assert result.fits


def test_with_mtp_both_pools_grow_by_a_steps_slots_and_the_head_is_split_over_tp(catalog):
    """With the MTP head at K = 3 both pools hold ⌊(M · 0.93 − W) / cell⌋ + 48 · 3 + 48 · 4 +
    100 tokens (0.5.6's headroom, 48 running requests); the head's pool is its one MLA layer.
    Its weights are split over the 4 GPUs as the target's are (the draft's ModelRunner runs at
    the target's tp_size): a quarter of what one GPU would hold."""
    result = r1(catalog, 0.93, mtp=True)
    weights = result.target.weights_bytes
    expected = math.floor((FREE * 0.93 - weights) / CELL) + 48 * 3 + 48 * 4 + 100
    assert result.max_total_num_tokens == expected
    assert result.kv_pool_bytes == expected * (CELL + MTP_CELL)
    assert result.max_running_requests == 48 and result.fits
    assert result.draft is not None and result.draft.tp == 4
    request = DeploymentRequest(target="deepseek-r1", gpu="b200", tp=4, method="mtp")
    split = resolve_deployment(request, catalog, get_engine("vllm")).draft  # at TP 4 there too
    whole = resolve_deployment(request, catalog, get_engine("plain")).draft  # at TP 1
    assert split is not None and whole is not None and whole.tp == 1
    assert result.draft.weights_bytes == split.weights.total  # 2.9 GiB
    assert result.draft.weights_bytes < whole.weights.total / 3  # 10.9 GiB whole
