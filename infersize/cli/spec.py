"""`infersize spec`: will target + draft fit, and how much faster?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infersize.cli import options as opt
from infersize.cli.app import app, print_json
from infersize.errors import InfersizeError

Units = Annotated[str, typer.Option("--units", help="gib (2^30 bytes) or gb (10^9 bytes).")]
Plot = Annotated[Path | None, typer.Option("--plot", help="Also draw speedup vs K (.png or .svg).")]


@app.command(
    epilog="Example: infersize spec --target llama-3.1-8b --draft llama-3.2-1b --gpu h100 "
    "--engine vllm --batch-size 8"
)
def spec(
    target: opt.Target,
    gpu: opt.Gpu,
    draft: opt.OptionalDraft = None,
    method: opt.Method = None,
    target_quant: opt.TargetQuant = "auto",
    draft_quant: opt.DraftQuant = "auto",
    context_length: opt.ContextLength = 4096,
    acceptance_rate: opt.AcceptanceRate = None,
    acceptance_rates: opt.AcceptanceRates = None,
    draft_k: opt.DraftK = 4,
    batch_size: opt.BatchSize = 1,
    kv_dtype: opt.KvDtype = "fp16",
    tp: opt.Tp = 1,
    engine: opt.Engine = "plain",
    gpu_memory_utilization: opt.GpuMemoryUtilization = None,
    max_num_batched_tokens: opt.MaxNumBatchedTokens = None,
    max_num_seqs: opt.MaxNumSeqs = None,
    vllm_sampler: opt.VllmSampler = None,
    speedup_model: opt.SpeedupModel = None,
    latency_ratio: opt.LatencyRatio = None,
    overhead_gib: opt.OverheadGib = None,
    max_k: opt.MaxK = 16,
    price_usd_per_hour: opt.Price = None,
    allow_cross_tokenizer: opt.AllowCrossTokenizer = False,
    units: Units = "gib",
    plot: Plot = None,
    catalog: opt.CatalogFiles = None,
    as_json: opt.Json = False,
) -> None:
    """Joint GPU memory of target + draft and the speculative-decoding speedup."""
    from infersize.catalog.store import load_catalog
    from infersize.service.resolve import DeploymentRequest
    from infersize.service.spec import SpecRequest, run_spec, spec_json

    no_draft = _check_flags(units, draft, method, plot)
    deployment = DeploymentRequest(
        target, gpu, target_quant, None if no_draft else draft, draft_quant, kv_dtype, tp,
        price_usd_per_hour, allow_cross_tokenizer, method,
    )  # fmt: skip
    request = SpecRequest(
        deployment, context_length, acceptance_rate, draft_k, batch_size, speedup_model,
        latency_ratio, max_k, engine, gpu_memory_utilization, overhead_gib,
        max_num_batched_tokens, max_num_seqs, vllm_sampler, opt.rates_list(acceptance_rates),
    )  # fmt: skip
    result = run_spec(request, load_catalog(tuple(catalog or ())))
    if plot is not None:
        from infersize.cli.plot import draw_spec_k_curve

        draw_spec_k_curve(result, plot)
    if as_json:
        print_json(spec_json(result))
        return
    from infersize.show.spec_panel import render_spec
    from infersize.show.terminal import console

    render_spec(console(), result, units.lower())


def _check_flags(units: str, draft: str | None, method: str | None, plot: Path | None) -> bool:
    """The flag combinations spec refuses; True when the target runs alone (--draft none)."""
    if units.lower() not in ("gib", "gb"):
        raise InfersizeError(f"--units must be gib or gb, got '{units}'")
    if draft is None and method is None:
        raise InfersizeError(
            "missing option '--draft' (a draft model, a head, or none; or give --method)"
        )
    no_draft = draft is not None and draft.strip().lower() == "none"
    if plot is not None and no_draft:
        raise InfersizeError("--plot draws speedup vs K, which needs a draft")
    return no_draft
