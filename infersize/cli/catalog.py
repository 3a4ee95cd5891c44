"""`infersize models list|show` and `infersize gpus list|show`: the catalogs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from infersize.cli import options as opt
from infersize.cli.app import command_app, print_json

if TYPE_CHECKING:
    from infersize.catalog.records import Gpu, Model
    from infersize.catalog.store import Catalog

models_app = command_app("models", help="The model catalog.", no_args_is_help=True)
gpus_app = command_app("gpus", help="The GPU catalog.", no_args_is_help=True)


def _catalog(overlays: opt.CatalogFiles) -> Catalog:
    from infersize.catalog.store import load_catalog

    return load_catalog(tuple(overlays or ()))


def _checkpoint_kind(model: Model) -> str:
    """What the model id loads: the text decoder only, the full multimodal checkpoint (its
    vision tower counted), or a speculator head that lives on a target."""
    if model.is_speculator_head:
        return "speculator head"
    return "text + vision" if model.vision is not None else "text"


def _model_json(model: Model) -> dict[str, Any]:
    from infersize.core.params import param_counts

    counts = param_counts(model)
    out = model.as_dict(exclude_none=True)
    out["params"] = counts.total
    out["checkpoint"] = _checkpoint_kind(model)
    if model.moe is not None:
        out["active_params"] = counts.active
    return out


@models_app.command("list", epilog="Example: infersize models list")
def models_list(catalog: opt.CatalogFiles = None, as_json: opt.Json = False) -> None:
    """Every model in the catalog, with its parameter count."""
    rows = [_model_json(m) for m in _catalog(catalog).models.records.values()]
    if as_json:
        print_json(rows)
        return
    from infersize.show.terminal import console, render_table

    render_table(
        console(),
        f"{len(rows)} models",
        ["id", "family", "tokenizer", "params (B)", "layers", "context", "checkpoint"],
        [
            [
                r["id"],
                r["family"],
                r["tokenizer_family"],
                f"{r['params'] / 1e9:.2f}",
                r["num_hidden_layers"],
                r["max_position_embeddings"],
                r["checkpoint"],
            ]
            for r in rows
        ],
    )


@models_app.command("show", epilog="Example: infersize models show qwen2.5-7b")
def models_show(
    name: Annotated[
        str,
        typer.Argument(
            help="Model id, alias or HF repo; a local HF folder, a .gguf file, or hf:ORG/NAME."
        ),
    ],
    catalog: opt.CatalogFiles = None,
    as_json: opt.Json = False,
) -> None:
    """One model's architecture fields and parameter count (read from files for checkpoints)."""
    from infersize.catalog.sources import resolve_model

    source = resolve_model(name, _catalog(catalog))
    data = _model_json(source.model)
    if source.checkpoint is not None:
        point = source.checkpoint
        data.update(
            source=point.origin,
            precision=point.precision,
            weights_bytes=point.weights.total if point.weights else None,
            elements_in_files=point.params_in_files,
        )
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        typer.echo(f"{key + ':':<28}{value}")


def _gpu_json(gpu: Gpu) -> dict[str, Any]:
    out = gpu.as_dict()
    out["bandwidth_bytes_per_s"] = gpu.bandwidth_bytes_per_s
    out["memory_gib"] = round(gpu.memory_bytes / 2**30, 2)
    return out


@gpus_app.command("list", epilog="Example: infersize gpus list")
def gpus_list(catalog: opt.CatalogFiles = None, as_json: opt.Json = False) -> None:
    """Every GPU in the catalog."""
    rows = [_gpu_json(g) for g in _catalog(catalog).gpus.records.values()]
    if as_json:
        print_json(rows)
        return
    from infersize.show.terminal import console, render_table

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


@gpus_app.command("show", epilog="Example: infersize gpus show h100")
def gpus_show(
    name: Annotated[str, typer.Argument(help="GPU id or alias.")],
    catalog: opt.CatalogFiles = None,
    as_json: opt.Json = False,
) -> None:
    """One GPU's datasheet values, with their sources."""
    data = _gpu_json(_catalog(catalog).gpu(name))
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        typer.echo(f"{key + ':':<24}{value}")
