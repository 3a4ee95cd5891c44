"""What would fit (spec's max_fitting_context_length, max_fitting_batch_size, min_fitting_tp and
the precision that fits) against brute force: every context, every batch, every TP evaluated."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersize.catalog.store import load_catalog
from infersize.cli import app
from infersize.core.engines import get_engine
from infersize.core.fit import deployment_memory
from infersize.errors import InfersizeError
from infersize.service.resolve import DeploymentRequest, resolve_deployment

CATALOG = load_catalog()
CASES = [
    # (target, draft, gpu, target quant, engine)
    ("llama-3.1-70b", "llama-3.2-1b", "h100", "bf16", "plain"),
    ("llama-3.1-70b", "llama-3.2-1b", "h100", "fp8", "vllm"),
    ("qwen2.5-32b", "qwen2.5-0.5b", "l40s", "int4", "plain"),
    ("qwen2.5-7b", "qwen2.5-0.5b", "a10g", "bf16", "vllm"),
    ("gemma-2-27b", "gemma-2-2b", "a100-40gb", "bf16", "plain"),
    ("mixtral-8x7b", None, "h100", "bf16", "plain"),
    ("qwen2.5-72b", "qwen2.5-0.5b", "a10g", "bf16", "plain"),
]


def spec(runner, target, draft, gpu, quant, engine, context, batch, k=4):
    args = [
        "spec",
        "--target",
        target,
        "--target-quant",
        quant,
        "--draft",
        draft or "none",
        "--gpu",
        gpu,
        "--engine",
        engine,
        "--context-length",
        str(context),
        "--batch-size",
        str(batch),
        "--draft-k",
        str(k),
        "--acceptance-rate",
        "0.7",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fits_everywhere(target, draft, gpu, quant, engine, contexts, batches, k, tp=1):
    try:
        dep = resolve_deployment(
            DeploymentRequest(
                target=target, gpu=gpu, target_quant=quant, draft=draft, draft_quant="auto", tp=tp
            ),
            CATALOG,
            get_engine(engine),
        )
    except InfersizeError:  # vLLM V1 splits the draft too: its heads must divide by the TP
        return np.zeros(np.broadcast_shapes(np.shape(contexts), np.shape(batches)), dtype=bool)
    return deployment_memory(dep.numbers, dep.engine, contexts, batches, k if draft else 0).fits


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(CASES), st.sampled_from([512, 4096, 32768]), st.sampled_from([1, 4, 32]))
def test_fit_limits_equal_brute_force(case, context, batch):
    from typer.testing import CliRunner

    target, draft, gpu, quant, engine = case
    data = spec(CliRunner(), target, draft, gpu, quant, engine, context, batch)
    k = 4 if draft else 0
    # every context from 1 to the model's maximum, at the batch asked
    longest = CATALOG.model(target).max_position_embeddings
    contexts = np.arange(1, longest + 1)
    fits = fits_everywhere(target, draft, gpu, quant, engine, contexts, batch, k)
    expected = int(contexts[fits].max()) if fits.any() else None
    assert data["max_fitting_context_length"] == expected
    assert fits.all() or not fits[np.argmin(fits) :].any()  # memory never falls with context
    # every batch from 1 to 2^20, at the context asked
    batches = np.arange(1, 2**20 + 1)
    fits = fits_everywhere(target, draft, gpu, quant, engine, context, batches, k)
    assert data["max_fitting_batch_size"] == (int(batches[fits].max()) if fits.any() else None)
    # the smallest TP of 1, 2, 4, 8 (dividing the heads) at which the cell fits
    heads = CATALOG.model(target).num_attention_heads
    tps = [tp for tp in (1, 2, 4, 8) if heads % tp == 0]
    fitting = [
        tp
        for tp in tps
        if fits_everywhere(target, draft, gpu, quant, engine, context, batch, k, tp)
    ]
    assert data["min_fitting_tp"] == (fitting[0] if fitting else None)


def test_oom_answers_what_would_fit(runner):
    # Llama-3.1-70B bf16 does not fit on one 80 GB H100 at any context; at fp8 it does
    data = spec(runner, "llama-3.1-70b", "llama-3.2-1b", "h100", "bf16", "plain", 8192, 1)
    assert data["fits"] is False and data["verdict"] == "OOM"
    assert data["max_fitting_context_length"] is None and data["max_fitting_batch_size"] is None
    assert data["min_fitting_tp"] == 2
    assert data["fitting_target_quant"] == "fp8"
    # no throughput, latency or cost for a deployment that cannot run
    for key in (
        "speedup",
        "baseline_tokens_per_s",
        "speculative_tokens_per_s",
        "baseline_ms_per_token",
        "speculative_ms_per_token",
        "usd_per_mtok",
    ):
        assert data[key] is None, key
    assert data["optimal_k"] is None


def test_least_break_even_over_k(runner):
    # A10G, Qwen2.5-7B + 0.5B at batch 16: the break-even α at K=4 is well above its least
    data = spec(runner, "qwen2.5-7b", "qwen2.5-0.5b", "a10g", "int4", "plain", 4096, 16)
    assert data["min_break_even_acceptance_rate"] <= data["break_even_acceptance_rate"]
    assert 1 <= data["min_break_even_draft_k"] <= 16
    least_k = data["min_break_even_draft_k"]
    at_least = spec(
        runner, "qwen2.5-7b", "qwen2.5-0.5b", "a10g", "int4", "plain", 4096, 16, least_k
    )
    assert at_least["break_even_acceptance_rate"] == pytest.approx(
        data["min_break_even_acceptance_rate"]
    )
