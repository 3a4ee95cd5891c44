"""Names as a user gives them (catalog ids, folders, GGUF files, hf: ids) resolved through the
catalog into a `Deployment` the core can evaluate. `spec`, the sweep and the figures all resolve
through here: one pairing rule, one price rule, one place that reads checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

from infersize.catalog.records import Gpu, KvDtype
from infersize.catalog.sources import ModelSource, resolve_format, resolve_model
from infersize.catalog.store import Catalog
from infersize.core.deployment import (
    DeploymentNumbers,
    Side,
    check_pair,
    deployment_numbers,
    prepare_side,
)
from infersize.core.engines import Engine


@dataclass(frozen=True)
class DeploymentRequest:
    """A deployment by name. The draft runs unsplit on rank 0 (vLLM draft_tensor_parallel 1)."""

    target: str
    gpu: str
    target_quant: str = "auto"
    draft: str | None = None  # None: the target alone
    draft_quant: str = "auto"
    kv_dtype: str = "fp16"
    tp: int = 1
    price_usd_per_hour: float | None = None
    allow_cross_tokenizer: bool = False


@dataclass(frozen=True)
class Deployment:
    target: Side
    draft: Side | None
    gpu: Gpu
    kv_dtype: KvDtype
    engine: Engine
    numbers: DeploymentNumbers


def resolve_side(
    name: str, quant: str, catalog: Catalog, kv: KvDtype, gpu: Gpu, tp: int = 1
) -> tuple[Side, ModelSource]:
    """`quant` 'auto' means the checkpoint's own precision. When the precision is the
    checkpoint's own and its files were read, the weights are the files' exact bytes."""
    source = resolve_model(name, catalog)
    fmt = resolve_format(source, quant, catalog)
    return prepare_side(source.model, fmt, kv, gpu, tp, source.exact_weights(fmt)), source


def resolve_deployment(req: DeploymentRequest, catalog: Catalog, engine: Engine) -> Deployment:
    gpu = catalog.gpu(req.gpu)
    kv_dtype = catalog.kv_dtype(req.kv_dtype)
    target, _ = resolve_side(req.target, req.target_quant, catalog, kv_dtype, gpu, req.tp)
    draft = None
    if req.draft is not None:
        draft, _ = resolve_side(req.draft, req.draft_quant, catalog, kv_dtype, gpu, 1)
        check_pair(target.model, draft.model, req.allow_cross_tokenizer)
    numbers = deployment_numbers(target, draft, gpu, req.price_usd_per_hour)
    return Deployment(target, draft, gpu, kv_dtype, engine, numbers)
