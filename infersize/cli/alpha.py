"""`infersize alpha`: engine acceptance metrics to Leviathan's α, and back."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from infersize.cli import options as opt
from infersize.cli.app import app, flag, print_json
from infersize.errors import InfersizeError


@app.command(epilog="Example: infersize alpha --mean-accepted-tokens 3.28 --draft-k 4")
def alpha(
    draft_k: Annotated[int, typer.Option("--draft-k", help="K the metric was measured at.")],
    mean_accepted_tokens: Annotated[
        float | None,
        typer.Option(
            "--mean-accepted-tokens",
            help="vLLM V1 'mean acceptance length' (τ in Spec-Bench/EAGLE), in [1, K+1].",
        ),
    ] = None,
    vllm_acceptance_rate: Annotated[
        float | None,
        typer.Option(
            "--vllm-acceptance-rate", help="vLLM V1 'acceptance rate' = accepted / proposed."
        ),
    ] = None,
    system_efficiency: Annotated[
        float | None,
        typer.Option("--system-efficiency", help="vLLM V0 'system efficiency' = E / (K+1)."),
    ] = None,
    acceptance_rate: Annotated[
        float | None, typer.Option("--acceptance-rate", help="α, to convert the other way.")
    ] = None,
    as_json: opt.Json = False,
) -> None:
    """Convert engine acceptance metrics to Leviathan's α (and back), given K."""
    from infersize.core.acceptance import METRICS, convert

    given = {
        name: value
        for name, value in zip(
            METRICS,
            (mean_accepted_tokens, vllm_acceptance_rate, system_efficiency, acceptance_rate),
            strict=True,
        )
        if value is not None
    }
    if len(given) != 1:
        raise InfersizeError("give exactly one of " + ", ".join(flag(m) for m in METRICS))
    ((metric, value),) = given.items()
    data = {"from": flag(metric).lstrip("-"), **dataclasses.asdict(convert(draft_k, metric, value))}
    if as_json:
        print_json(data)
        return
    typer.echo(f"from {data['from']} at K={draft_k}:")
    for key in ("acceptance_rate", *(m for m in METRICS if m != "acceptance_rate")):
        typer.echo(f"  {key + ':':<24}{data[key]:.6g}")
