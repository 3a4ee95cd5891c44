"""The step model: one function prices the engine step for `spec`, the simulator and the
mean-field model. Its lookup table (what the simulator reads) equals it exactly, and the step
`spec` prices is its all-decode case."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersize.core.engines import get_engine
from infersize.core.serving.step import StepBatch, decode_batch, engine_step_seconds, step_table
from infersize.core.speed import step_times
from infersize.service.resolve import DeploymentRequest, resolve_deployment

PAIRS = {
    "draft model": ("llama-3.1-8b", "llama-3.2-1b", "h100"),
    "eagle3 head": ("llama-3.1-8b", "eagle3-llama3.1-8b", "h100"),
    "moe target, tp 2": ("qwen3-30b-a3b", "qwen3-0.6b", "a100"),
    "n-gram": ("qwen2.5-7b", "ngram", "l40s"),
}


def numbers(catalog, name, engine="vllm"):
    target, draft, gpu = PAIRS[name]
    tp = 2 if "tp 2" in name else 1
    request = DeploymentRequest(target=target, draft=draft, gpu=gpu, tp=tp)
    return resolve_deployment(request, catalog, get_engine(engine)).numbers


@pytest.mark.parametrize("engine_name", ["vllm", "sglang"])  # SGLang: a step's host work too
@pytest.mark.parametrize("name", list(PAIRS))
@given(
    seqs=st.integers(0, 200),
    k=st.integers(0, 6),
    prefill=st.integers(0, 4000),
    context=st.floats(1.0, 32_000.0),
)
@settings(max_examples=40, deadline=None)
def test_the_simulators_table_is_the_step_model(
    catalog, engine_name, name, seqs, k, prefill, context
):
    dep = numbers(catalog, name)
    draft = dep.draft if k else None
    batch = StepBatch(
        decode_seqs=seqs,
        draft_k=k,
        decode_context=seqs * context,
        prefill_tokens=prefill,
        prefill_attended=prefill * (prefill + 1) / 2.0,
        target_kv_bytes=seqs * context * 1e5,
        draft_kv_bytes=0.0 if draft is None else seqs * context * 2e4,
    )
    engine = get_engine(engine_name)
    table = step_table(dep.target, draft, engine, k, 200 * 7 + 4000)
    looked_up = table.seconds(
        seqs,
        prefill,
        batch.decode_context,
        batch.prefill_attended,
        batch.target_kv_bytes,
        batch.draft_kv_bytes,
    )
    exact = float(engine_step_seconds(dep.target, draft, engine, batch).total)
    assert looked_up == pytest.approx(exact, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", list(PAIRS))
def test_spec_prices_the_all_decode_step_of_the_step_model(catalog, name):
    """spec's roofline step cost K · T_draft(B,1) + T_target(B,K+1) is the engine step of B
    decoding sequences verifying K drafts each (no prefill)."""
    dep = numbers(catalog, name, engine="plain")
    engine = get_engine("plain")
    batch, context, ks = np.array([1.0, 16.0, 128.0])[:, None], 2048.0, np.arange(1, 9)
    times = step_times(dep.target, dep.draft, engine, context, batch, ks)
    step = engine_step_seconds(
        dep.target, dep.draft, engine, decode_batch(dep.target, dep.draft, batch, context, ks)
    )
    assert np.allclose(ks * times.draft + times.verify, step.total, rtol=1e-12)
    plain = engine_step_seconds(
        dep.target, None, engine, decode_batch(dep.target, None, batch, context, 0)
    )
    assert np.allclose(times.target, plain.total, rtol=1e-12)


def test_prefill_chunks_and_drafts_only_add_time(catalog):
    dep = numbers(catalog, "draft model")
    engine = get_engine("vllm")
    base = decode_batch(dep.target, dep.draft, 32, 4096, 3)
    with_prefill = StepBatch(
        decode_seqs=32,
        draft_k=3,
        decode_context=32 * 4096.0,
        prefill_tokens=2048,
        prefill_attended=2048 * 2049 / 2,
        target_kv_bytes=base.target_kv_bytes,
        draft_kv_bytes=base.draft_kv_bytes,
    )
    decode_only = engine_step_seconds(dep.target, dep.draft, engine, base)
    mixed = engine_step_seconds(dep.target, dep.draft, engine, with_prefill)
    assert float(mixed.target) > float(decode_only.target)
    assert float(mixed.draft) > float(decode_only.draft)  # the drafter sees the chunk too
    no_drafts = engine_step_seconds(
        dep.target, dep.draft, engine, decode_batch(dep.target, dep.draft, 32, 4096, 0)
    )
    assert float(no_drafts.draft) == 0.0


def test_sglangs_speculative_steps_pay_the_host_work_it_does_not_overlap(catalog):
    """SGLang's EAGLE worker runs without the overlap scheduler, so every step with drafts to
    verify adds its host work: 1.1 ms, what overlapping it saved a step of Llama-3.1-8B with a
    5-token EAGLE chain (https://github.com/sgl-project/sglang/pull/11398: 2.99 tokens a step at
    246.80 tokens/s without, 3.01 at 273.43 with). n-gram lookup pays it too; a step with no
    decodes, a step without drafts and vLLM's steps (async scheduling) add nothing."""
    sglang = get_engine("sglang")
    assert sglang.spec_host_s == pytest.approx(2.99 / 246.80 - 3.01 / 273.43, abs=1e-5)
    overlapped = replace(sglang, spec_host_s=0.0)

    def added(target, draft, batch):
        priced = engine_step_seconds(target, draft, sglang, batch).total
        return float(priced - engine_step_seconds(target, draft, overlapped, batch).total)

    prefill_only = StepBatch(decode_seqs=0, draft_k=3, decode_context=0.0, prefill_tokens=512)
    for name in ("eagle3 head", "n-gram"):
        dep = numbers(catalog, name, "sglang")
        target, draft = dep.target, dep.draft
        assert added(target, draft, decode_batch(target, draft, 8, 2048, 3)) == pytest.approx(
            1.1e-3
        )
        assert added(target, None, decode_batch(target, None, 8, 2048, 0)) == 0.0
        assert added(target, draft, prefill_only) == 0.0
    assert get_engine("vllm").spec_host_s == 0.0
