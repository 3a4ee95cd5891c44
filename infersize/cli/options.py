"""Options shared by several commands, declared once (Annotated) with their help text.
Choices that grow (engines, speedup models) list their registry in the help."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from infersize.catalog.workload_kinds import WORKLOAD_KINDS
from infersize.cli.completion import (
    complete_drafter,
    complete_engine,
    complete_gpu,
    complete_kv_dtype,
    complete_method,
    complete_model,
)
from infersize.core.engines import ENGINES
from infersize.core.methods import METHODS
from infersize.core.speedup import SPEEDUP_MODELS
from infersize.defaults import DEFAULTS

if TYPE_CHECKING:
    from infersize.service.request import SpecRequest

R = TypeVar("R")

Target = Annotated[
    str,
    typer.Option(
        "--target",
        help="Target: catalog id or alias, a local HF folder, a .gguf file, or hf:ORG/NAME.",
        autocompletion=complete_model,
    ),
]
TargetQuant = Annotated[
    str,
    typer.Option(
        "--target-quant",
        help="Target weight precision (auto: the checkpoint's own, exact bytes from its files).",
    ),
]
Draft = Annotated[
    str,
    typer.Option(
        "--draft",
        help="Draft model, or 'none' for the target alone.",
        autocompletion=complete_drafter,
    ),
]
OptionalDraft = Annotated[
    str | None,
    typer.Option(
        "--draft",
        help="Draft model, speculator head or 'ngram'; 'none' for the target alone "
        "(may be left out with --method: the catalog's published head).",
        autocompletion=complete_drafter,
    ),
]
Method = Annotated[
    str | None,
    typer.Option(
        "--method",
        help="Speculative method, vLLM's names: "
        f"{', '.join(METHODS)}. Without --draft, the catalog's published drafter for the target.",
        autocompletion=complete_method,
    ),
]
DraftQuant = Annotated[str, typer.Option("--draft-quant", help="Draft weight precision.")]
Gpu = Annotated[
    str,
    typer.Option(
        "--gpu",
        help="GPU (id or alias, e.g. a100, h100, l40s, 4090).",
        autocompletion=complete_gpu,
    ),
]
ContextLength = Annotated[
    int,
    typer.Option(
        "--context-length",
        help="Tokens in each sequence's KV cache at decode (prompt + answer so far).",
    ),
]
SpecContextLength = Annotated[
    int | None,
    typer.Option(
        "--context-length",
        help="Tokens in each sequence's KV cache at decode (prompt + answer so far) "
        f"[default: {DEFAULTS.context_length}]; or give --input-tokens and --output-tokens.",
    ),
]
SpecInputTokens = Annotated[
    int | None,
    typer.Option(
        "--input-tokens",
        help="Prompt tokens per request: with --output-tokens, the context is input + output/2 "
        "(the average a serving engine's decode steps hold).",
    ),
]
SpecOutputTokens = Annotated[
    int | None,
    typer.Option("--output-tokens", help="Answer tokens per request (with --input-tokens)."),
]
AcceptanceRate = Annotated[
    float | None,
    typer.Option(
        "--acceptance-rate",
        help="α: probability a draft token is accepted (default: published for the pair, "
        "else a prior fitted to published pairs).",
    ),
]
AcceptanceRates = Annotated[
    str | None,
    typer.Option(
        "--acceptance-rates",
        help='Per-position acceptance r1,r2,... as vLLM logs it ("Per-position acceptance '
        'rate"): E = 1 + r1 + ... + rK. Instead of --acceptance-rate.',
    ),
]
DraftK = Annotated[
    int,
    typer.Option(
        "--draft-k",
        "--speculative-num-steps",
        help="K: draft tokens per verification step (a tree's depth, SGLang's num-steps).",
    ),
]
EagleTopk = Annotated[
    int,
    typer.Option(
        "--eagle-topk",
        "--speculative-eagle-topk",
        help="Draft candidates per node: 1 drafts a chain of K tokens, more a tree of that "
        "width (SGLang, TensorRT-LLM).",
    ),
]
NumDraftTokens = Annotated[
    int | None,
    typer.Option(
        "--num-draft-tokens",
        "--speculative-num-draft-tokens",
        help="A tree's tokens verified per sequence, the root included (a chain: K + 1).",
    ),
]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Concurrent sequences.")]
KvDtype = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        help="KV cache dtype: an id or alias of the catalog's kv_dtypes (configs/precisions.yaml"
        " and --catalog overlays; tab completes them).",
        autocompletion=complete_kv_dtype,
    ),
]
Tp = Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs for the target.")]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Memory rules and latency constants: "
        + "; ".join(f"{name}: {e.description}" for name, e in ENGINES.items())
        + ".",
        autocompletion=complete_engine,
    ),
]
SpeedupModel = Annotated[
    str | None,
    typer.Option(
        "--speedup-model",
        help="How the speedup is computed (default: roofline; leviathan when --latency-ratio "
        "is given): "
        + "; ".join(f"{name}: {m.summary}" for name, m in SPEEDUP_MODELS.items())
        + ".",
    ),
]
LatencyRatio = Annotated[
    float | None,
    typer.Option("--latency-ratio", help="γ = target step / draft step; default: roofline."),
]
MaxK = Annotated[int, typer.Option("--max-k", help="Largest K searched for the optimum.")]
Price = Annotated[
    float | None, typer.Option("--price-usd-per-hour", help="GPU price override ($ per GPU-hour).")
]
AllowCrossTokenizer = Annotated[
    bool,
    typer.Option("--allow-cross-tokenizer", help="Size a draft with another tokenizer anyway."),
]
CatalogFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="Overlay YAML with your own models/gpus/precisions (repeatable).",
        metavar="FILE...",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object (stable keys).")]
FigureOut = Annotated[Path, typer.Option("--out", "-o", help="Figure file, .png or .svg.")]
OutputDir = Annotated[Path, typer.Argument(help="A sweep's output folder.")]


# A slice of a sweep's tables (best, report, plot frontier)
SliceContext = Annotated[
    int | None, typer.Option("--context-length", help="Default: the smallest swept.")
]
SliceBatch = Annotated[
    int | None, typer.Option("--batch-size", help="Default: the smallest swept.")
]
SliceAlpha = Annotated[
    float | None,
    typer.Option(
        "--alpha", help="α, when every pair shares it (default: nearest 0.7).", min=0, max=1
    ),
]
SliceScenario = Annotated[
    int | None,
    typer.Option(
        "--scenario", help="Acceptance scenario, when pairs have their own α (default: the middle)."
    ),
]
GpuFilter = Annotated[
    str | None,
    typer.Option("--gpu", help="Only this GPU (id or alias).", autocompletion=complete_gpu),
]
TargetFilter = Annotated[
    str | None,
    typer.Option("--target", help="Only this target model.", autocompletion=complete_model),
]
EngineFilter = Annotated[
    str | None,
    typer.Option("--engine", help="Only this engine.", autocompletion=complete_engine),
]


def rates_list(text: str | None) -> tuple[float, ...] | None:
    """'0.73,0.52,0.35' (or spaces, or vLLM's bracketed list) as floats; a clear error else,
    an empty item between commas included ('0.5,,0.3' is not '0.5,0.3')."""
    if text is None:
        return None
    from infersize.errors import InfersizeError

    items = text.strip().strip("[]").split(",")
    parts = [p for item in items for p in item.split()]
    if len(items) > 1 and any(not item.strip() for item in items):
        raise InfersizeError(
            f"--acceptance-rates has an empty item between commas, got '{text}': give one "
            "number per position (0.73,0.52,0.35)"
        )
    try:
        return tuple(float(p) for p in parts)
    except ValueError:
        raise InfersizeError(
            f"--acceptance-rates takes numbers separated by commas (0.73,0.52,0.35), got '{text}'"
        ) from None


def record_from_options(record: type[R], options: Mapping[str, Any], **given: Any) -> R:
    """`record` built from a command's options: each field from the option of its name (option
    names are the records' field names), `given` replacing or adding values. A field the command
    has no option for keeps the record's default; tests/test_defaults.py checks which those are."""
    names = {f.name for f in fields(record)}  # type: ignore[arg-type]
    values = {name: options[name] for name in names if name in options}
    return record(**(values | given))


def spec_request(options: Mapping[str, Any]) -> SpecRequest:
    """The SpecRequest of a command that takes `spec`'s options (spec, plot batch, capacity)."""
    from infersize.core.engines import EngineSettings
    from infersize.service.request import SpecRequest
    from infersize.service.resolve import DeploymentRequest

    deployment = record_from_options(DeploymentRequest, options)
    return record_from_options(
        SpecRequest,
        options,
        deployment=deployment,
        engine=EngineSettings(options["engine"], **options["engine_knobs"]),
        acceptance_rates=rates_list(options.get("acceptance_rates")),
    )


AcceptanceLength = Annotated[
    float | None,
    typer.Option(
        "--acceptance-length",
        help="Mean acceptance length E at --draft-k (and the tree), as engines log it (vLLM "
        "'Mean acceptance length', SGLang 'accept len', TensorRT-LLM's acceptance length): "
        "instead of --acceptance-rate.",
    ),
]
WorkloadKind = Annotated[
    str | None,
    typer.Option(
        "--workload-kind",
        help="The kind of traffic, whose published acceptance is used where there is one "
        "(n-gram needs it): "
        + "; ".join(f"{k}: {v}" for k, v in WORKLOAD_KINDS.items())
        + " (rag is summarization).",
    ),
]
AcceptancePositions = Annotated[
    int | None,
    typer.Option(
        "--acceptance-positions",
        help="The K your --acceptance-rate was measured at: positions past it are not credited "
        "and the K search stops there (default: every position, i.i.d.).",
    ),
]
