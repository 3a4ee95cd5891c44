"""`infersize alpha`: engine acceptance metrics to Leviathan's α, and back; or all of them
measured from a real run (a vLLM log, a /metrics scrape, a llama-server log)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infersize.cli import options as opt
from infersize.cli.app import command_app, flag, print_json
from infersize.errors import InfersizeError

if TYPE_CHECKING:
    from infersize.service.speclogs import MeasuredAcceptance

FromVllmLog = Annotated[
    Path | None,
    typer.Option(
        "--from-vllm-log",
        metavar="FILE",
        help="A vLLM server log: its 'SpecDecoding metrics:' lines (V1, one interval each, "
        "summed) or 'Speculative metrics:' lines (V0, cumulative).",
    ),
]
FromPrometheus = Annotated[
    Path | None,
    typer.Option(
        "--from-prometheus",
        metavar="FILE",
        help="A vLLM /metrics scrape: vllm:spec_decode_num_*_total summed over engines.",
    ),
]
FromLlamaCppLog = Annotated[
    Path | None,
    typer.Option(
        "--from-llama-cpp-log",
        metavar="FILE",
        help="A llama-server log with 'statistics <impl>: #gen drafts ...' or 'draft "
        "acceptance = ..., mean acceptance length = ...' lines.",
    ),
]
DraftK = Annotated[
    int | None,
    typer.Option(
        "--draft-k",
        help="K the metric was measured at. With a --from-* file: optional, only its counts "
        "at this K (a file that mixes K otherwise gives the K with the most drafts, noted).",
    ),
]


alpha_app = command_app("alpha")


@alpha_app.command(epilog="Example: infersize alpha --mean-accepted-tokens 3.28 --draft-k 4")
def alpha(
    draft_k: DraftK = None,
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
    from_vllm_log: FromVllmLog = None,
    from_prometheus: FromPrometheus = None,
    from_llama_cpp_log: FromLlamaCppLog = None,
    as_json: opt.Json = False,
) -> None:
    """Convert engine acceptance metrics to Leviathan's α (and back), given K; or measure them
    from a real run's log or /metrics scrape (α, the per-position profile, the mean
    acceptance length, and the flags that give them to `infersize spec`)."""
    metrics = (mean_accepted_tokens, vllm_acceptance_rate, system_efficiency, acceptance_rate)
    files = {
        "vllm-log": from_vllm_log,
        "prometheus": from_prometheus,
        "llama-cpp-log": from_llama_cpp_log,
    }
    given = {source: path for source, path in files.items() if path is not None}
    if given:
        if len(given) > 1 or any(m is not None for m in metrics):
            raise InfersizeError(
                "a --from-* file stands alone: give one of --from-vllm-log, --from-prometheus, "
                "--from-llama-cpp-log and none of the metric options"
            )
        ((source, path),) = given.items()
        _measured(source, path, draft_k, as_json)
        return
    if draft_k is None:
        raise InfersizeError("Missing option '--draft-k'.")
    _convert(draft_k, metrics, as_json)


def _convert(draft_k: int, values: tuple[float | None, ...], as_json: bool) -> None:
    from infersize.core.acceptance import METRICS, convert

    given = {name: value for name, value in zip(METRICS, values, strict=True) if value is not None}
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


def _measured(source: str, path: Path, draft_k: int | None, as_json: bool) -> None:
    from infersize.service.speclogs import measure, measured_json

    result = measure(source, path, draft_k)
    data = measured_json(result)
    if as_json:
        print_json(data)
        return
    _show(result, data)


def _show(result: MeasuredAcceptance, data: dict[str, object]) -> None:
    typer.echo(
        f"from {result.source} {result.path} at K={result.draft_k} "
        f"({result.intervals} interval{'s' if result.intervals != 1 else ''}):"
    )
    for key in ("accepted_tokens", "drafted_tokens", "drafts", "mean_acceptance_length"):
        typer.echo(f"  {key + ':':<26}{data[key]:.6g}")
    if result.per_position:
        for key, values in (
            ("per_position_acceptance", result.per_position),
            ("conditional_acceptance", result.conditional),
        ):
            typer.echo(f"  {key + ':':<26}" + ", ".join(f"{v:.4g}" for v in values))
    typer.echo(f"  {'acceptance_rate:':<26}{result.metrics.acceptance_rate:.6g}  (α, i.i.d.)")
    for key in ("vllm_acceptance_rate", "system_efficiency"):
        typer.echo(f"  {key + ':':<26}{data[key]:.6g}")
    for note in result.notes:
        typer.echo(f"note: {note}")
    typer.echo(
        "best K needs the deployment: use --acceptance-rates r1,r2,... with infersize spec, "
        f"here: infersize spec --target ... --draft ... --gpu ... {result.spec_flags()}"
    )
