"""The command line: parse, call the library, render, map errors to exit codes. No maths here.

Every user mistake (an InfersizeError or a usage error) ends with exit code 2 and one line on
stderr; `--debug` anywhere on the command line shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from infersize import __version__
from infersize.cli_plot import plot_app, report
from infersize.cli_sweep import best, sweep_app
from infersize.errors import InfersizeError


def _fail(message: str, prefix: str = "error", code: int = 2) -> None:
    """One line on stderr: control characters a user typed (a newline in a name) are escaped."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    typer.echo(f"{prefix}: {line}", err=True)
    sys.exit(code)


class CleanErrors(TyperGroup):
    """Turns usage errors and library errors into `error: <one line>` and exit code 2."""

    def main(
        self,
        args: Any = None,
        prog_name: Any = None,
        complete_var: Any = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv
        argv = [a for a in argv if a != "--debug"]
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(130)
        except typer.TyperException as exc:  # usage errors: bad option, missing value, ...
            if debug:
                raise
            _fail(exc.format_message())
        except InfersizeError as exc:
            if debug:
                raise
            _fail(str(exc))
        except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
            if debug:
                raise
            _fail(
                f"{type(exc).__name__}: {exc} (run again with --debug for the traceback)",
                prefix="internal error",
                code=1,
            )
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    cls=CleanErrors,
    help="Size speculative decoding: will target + draft fit on the GPU, and how much faster?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="The model catalog.", no_args_is_help=True)
gpus_app = typer.Typer(help="The GPU catalog.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(gpus_app, name="gpus")
app.add_typer(sweep_app, name="sweep")
app.command("best")(best)
app.add_typer(plot_app, name="plot")
app.command("report")(report)

CatalogOption = typer.Option(
    None,
    "--catalog",
    help="Overlay YAML with your own models/gpus/precisions (repeatable).",
)
JsonOption = typer.Option(False, "--json", help="Print one JSON object (stable keys).")


def _catalog(overlays: list[Path] | None):
    from infersize.catalog import load_catalog

    return load_catalog(tuple(overlays or ()))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infersize {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Speculative-decoding sizer. `--debug` anywhere shows tracebacks."""


def _print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, allow_nan=False))


@app.command()
def spec(
    target: str = typer.Option(
        ...,
        "--target",
        help="Target: catalog id or alias, a local HF folder, a .gguf file, or hf:ORG/NAME.",
    ),
    target_quant: str = typer.Option(
        "auto",
        "--target-quant",
        help="Target weight precision (auto: the checkpoint's own, exact bytes from its files).",
    ),
    draft: str = typer.Option(..., "--draft", help="Draft model, or 'none' for the target alone."),
    draft_quant: str = typer.Option("auto", "--draft-quant", help="Draft weight precision."),
    gpu: str = typer.Option(..., "--gpu", help="GPU (id or alias, e.g. a100, h100, l40s, 4090)."),
    context_length: int = typer.Option(4096, "--context-length", help="Tokens per sequence."),
    acceptance_rate: float = typer.Option(
        0.7, "--acceptance-rate", help="α: probability a draft token is accepted."
    ),
    draft_k: int = typer.Option(4, "--draft-k", help="K: draft tokens per verification step."),
    batch_size: int = typer.Option(1, "--batch-size", help="Concurrent sequences."),
    kv_dtype: str = typer.Option("fp16", "--kv-dtype", help="KV cache dtype (fp16, bf16, fp8...)."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel GPUs for the target."),
    engine: str = typer.Option(
        "plain", "--engine", help="plain, vllm or llama.cpp (memory rules and latency constants)."
    ),
    gpu_memory_utilization: float = typer.Option(
        None, "--gpu-memory-utilization", help="vLLM's share of GPU memory (default 0.9)."
    ),
    speedup_model: str = typer.Option(
        "leviathan",
        "--speedup-model",
        help="leviathan (default), roofline, or linear (the seed's).",
    ),
    latency_ratio: float = typer.Option(
        None, "--latency-ratio", help="γ = target step / draft step; default: roofline."
    ),
    overhead_gib: float = typer.Option(
        None, "--overhead-gib", help="Runtime overhead per GPU, GiB (default per engine)."
    ),
    max_k: int = typer.Option(16, "--max-k", help="Largest K searched for the optimum."),
    price: float = typer.Option(None, "--price-usd-per-hour", help="GPU price override."),
    allow_cross_tokenizer: bool = typer.Option(
        False, "--allow-cross-tokenizer", help="Size a draft with another tokenizer anyway."
    ),
    units: str = typer.Option("gib", "--units", help="gib (2^30 bytes) or gb (10^9 bytes)."),
    plot: Path = typer.Option(None, "--plot", help="Also draw speedup vs K (.png or .svg)."),
    catalog: list[Path] = CatalogOption,
    as_json: bool = JsonOption,
) -> None:
    """Joint GPU memory of target + draft and the speculative-decoding speedup."""
    from infersize.engines import get_engine
    from infersize.spec import SpecRequest, run_spec

    if units.lower() not in ("gib", "gb"):
        raise InfersizeError(f"--units must be gib or gb, got '{units}'")
    request = SpecRequest(
        target=target,
        target_quant=target_quant,
        draft=None if draft.strip().lower() == "none" else draft,
        draft_quant=draft_quant,
        gpu=gpu,
        context_length=context_length,
        acceptance_rate=acceptance_rate,
        draft_k=draft_k,
        batch_size=batch_size,
        kv_dtype=kv_dtype,
        tp=tp,
        speedup_model=speedup_model.lower(),
        latency_ratio=latency_ratio,
        k_max=max_k,
        price_usd_per_hour=price,
        allow_cross_tokenizer=allow_cross_tokenizer,
    )
    if plot is not None and request.draft is None:
        raise InfersizeError("--plot draws speedup vs K, which needs a draft")
    report = run_spec(
        request, _catalog(catalog), get_engine(engine, gpu_memory_utilization, overhead_gib)
    )
    if plot is not None:
        from infersize.plot import save, speedup_vs_k_figure

        data = report.data
        title = (
            f"{data['target']['model']} + {data['draft']['model']} on {data['gpu']['name']}"
            f": speedup vs K at γ = {data['latency_ratio']:.1f}"
        )
        save(
            speedup_vs_k_figure([acceptance_rate], data["latency_ratio"], max_k, draft_k, title),
            plot,
        )
    if as_json:
        _print_json(report.data)
        return
    from infersize.report import console, render_spec

    render_spec(console(), report.data, units.lower())


@app.command()
def alpha(
    draft_k: int = typer.Option(..., "--draft-k", help="K the metric was measured at."),
    mean_accepted_tokens: float = typer.Option(
        None,
        "--mean-accepted-tokens",
        help="vLLM V1 'mean acceptance length' (τ in Spec-Bench/EAGLE), in [1, K+1].",
    ),
    vllm_acceptance_rate: float = typer.Option(
        None, "--vllm-acceptance-rate", help="vLLM V1 'acceptance rate' = accepted / proposed."
    ),
    system_efficiency: float = typer.Option(
        None, "--system-efficiency", help="vLLM V0 'system efficiency' = E / (K+1)."
    ),
    acceptance_rate: float = typer.Option(
        None, "--acceptance-rate", help="α, to convert the other way."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Convert engine acceptance metrics to Leviathan's α (and back), given K."""
    from infersize.acceptance import convert

    data = convert(
        draft_k, mean_accepted_tokens, vllm_acceptance_rate, system_efficiency, acceptance_rate
    )
    if as_json:
        _print_json(data)
        return
    typer.echo(f"from {data['from']} at K={draft_k}:")
    for key in (
        "acceptance_rate",
        "mean_accepted_tokens",
        "vllm_acceptance_rate",
        "system_efficiency",
    ):
        typer.echo(f"  {key + ':':<24}{data[key]:.6g}")


@app.command()
def bench(
    loop_cells: int = typer.Option(3000, "--loop-cells", help="Cells timed in the Python loop."),
) -> None:
    """Cells/s of the sweep engine against a plain-Python per-cell loop (same formulas)."""
    if loop_cells < 1:
        raise InfersizeError(f"--loop-cells must be at least 1, got {loop_cells}")
    from infersize.bench import run_bench

    result = run_bench(loop_cells)
    typer.echo(
        f"engine (numpy, chunked, with frontier/best reduction): {result.engine_cells:,} "
        f"cells in {result.engine_s:.3f} s = {result.engine_rate:,.0f} cells/s"
    )
    typer.echo(
        f"plain Python loop over the same core functions: {result.loop_cells:,} cells "
        f"in {result.loop_s:.3f} s = {result.loop_rate:,.0f} cells/s"
    )
    typer.echo(f"ratio: {result.ratio:,.0f}x")


def _model_json(model) -> dict[str, Any]:
    from infersize.params import param_counts

    counts = param_counts(model)
    out = model.model_dump(exclude_none=True)
    out["params"] = counts.total
    if model.is_moe:
        out["active_params"] = counts.active
    return out


@models_app.command("list")
def models_list(catalog: list[Path] = CatalogOption, as_json: bool = JsonOption) -> None:
    """Every model in the catalog, with its parameter count."""
    cat = _catalog(catalog)
    rows = [_model_json(m) for m in cat.models.records.values()]
    if as_json:
        _print_json(rows)
        return
    from infersize.report import console, render_table

    render_table(
        console(),
        f"{len(rows)} models",
        ["id", "family", "tokenizer", "params (B)", "layers", "context"],
        [
            [
                r["id"],
                r["family"],
                r["tokenizer_family"],
                f"{r['params'] / 1e9:.2f}",
                r["num_hidden_layers"],
                r["max_position_embeddings"],
            ]
            for r in rows
        ],
    )


@models_app.command("show")
def models_show(
    name: str = typer.Argument(
        ..., help="Model id, alias or HF repo; a local HF folder, a .gguf file, or hf:ORG/NAME."
    ),
    catalog: list[Path] = CatalogOption,
    as_json: bool = JsonOption,
) -> None:
    """One model's architecture fields and parameter count (read from files for checkpoints)."""
    from infersize.sources import resolve_model

    source = resolve_model(name, _catalog(catalog))
    data = _model_json(source.spec)
    if source.checkpoint is not None:
        point = source.checkpoint
        data.update(
            source=point.origin,
            precision=point.precision,
            weights_bytes=point.weights.total if point.weights else None,
            elements_in_files=point.params_in_files,
        )
    if as_json:
        _print_json(data)
        return
    for key, value in data.items():
        typer.echo(f"{key + ':':<28}{value}")


def _gpu_json(gpu) -> dict[str, Any]:
    out = gpu.model_dump()
    out["bandwidth_bytes_per_s"] = gpu.bandwidth_bytes_per_s
    out["memory_gib"] = round(gpu.memory_bytes / 2**30, 2)
    return out


@gpus_app.command("list")
def gpus_list(catalog: list[Path] = CatalogOption, as_json: bool = JsonOption) -> None:
    """Every GPU in the catalog."""
    rows = [_gpu_json(g) for g in _catalog(catalog).gpus.records.values()]
    if as_json:
        _print_json(rows)
        return
    from infersize.report import console, render_table

    render_table(
        console(),
        f"{len(rows)} GPUs",
        ["id", "name", "GiB", "GB/s", "fp16 TFLOPS", "fp8 TFLOPS", "$/h"],
        [
            [
                r["id"],
                r["name"],
                f"{r['memory_gib']:.2f}",
                f"{r['bandwidth_gb_per_s']:g}",
                f"{r['fp16_tflops']:g}",
                r["fp8_tflops"] or "-",
                r["price_usd_per_hour"] or "-",
            ]
            for r in rows
        ],
    )


@gpus_app.command("show")
def gpus_show(
    name: str = typer.Argument(..., help="GPU id or alias."),
    catalog: list[Path] = CatalogOption,
    as_json: bool = JsonOption,
) -> None:
    """One GPU's datasheet values, with their sources."""
    data = _gpu_json(_catalog(catalog).gpu(name))
    if as_json:
        _print_json(data)
        return
    for key, value in data.items():
        typer.echo(f"{key + ':':<24}{value}")
