"""What would fit: the longest context, the largest batch, the smallest tensor parallelism, and
the least change of precision or KV dtype at which a deployment fits in memory."""

from __future__ import annotations

from dataclasses import dataclass, replace

from infersize.catalog.records import WeightFormat
from infersize.catalog.store import Catalog
from infersize.core.engines import Engine
from infersize.core.fit import deployment_memory
from infersize.core.limits import max_fitting_batch, max_fitting_context
from infersize.core.tree import CHAIN, Tree
from infersize.errors import InfersizeError
from infersize.service.resolve import LEVELS, Deployment, DeploymentRequest, resolve_deployment

MAX_BATCH = 1 << 20  # far past any engine's max_num_seqs
TP_SIZES = (1, 2, 4, 8)  # one node; a size must also divide the attention heads


@dataclass(frozen=True, kw_only=True)
class FitLimits:
    max_fitting_context_length: int | None  # at the batch and K asked; None: not even 1 token
    max_fitting_batch_size: int | None  # at the context and K asked; None: not even 1 sequence
    min_fitting_tp: int | None  # smallest of 1, 2, 4, 8 that fits; None: none does
    fitting_target_quant: str | None = None  # when it does not fit: the most bits that fit
    fitting_kv_dtype: str | None = None  # when it does not fit: the widest KV dtype that fits


@dataclass(frozen=True)
class Ask:
    """The cell a limit is found for."""

    context_length: int
    batch_size: int
    k: int  # draft length (0 without a draft)
    tree: Tree = CHAIN


def _fits(dep: Deployment, ask: Ask) -> bool:
    """Fits in memory on a GPU that can run its precisions."""
    if dep.support.level == "unsupported":
        return False
    memory = deployment_memory(
        dep.numbers, dep.engine, ask.context_length, ask.batch_size, ask.k, tree=ask.tree
    )
    return bool(memory.fits)


def _fits_with(req: DeploymentRequest, catalog: Catalog, engine: Engine, ask: Ask) -> bool:
    """Whether another deployment of the same models fits; False when it cannot be built (a TP
    size that does not divide the heads)."""
    try:
        return _fits(resolve_deployment(req, catalog, engine), ask)
    except InfersizeError:
        return False


def _lighter_formats(catalog: Catalog, dep: Deployment) -> list[WeightFormat]:
    """Formats with fewer bits per weight than the target's that the GPU can run: natively
    supported first, then most bits first (the least change)."""
    current, family = dep.target.fmt, dep.engine.support_family
    levels = {
        f.id: LEVELS.index(catalog.support(f.id, dep.gpu, family).level)
        for f in catalog.weight_formats.records.values()
        if f.linear_bits_per_weight < current.linear_bits_per_weight
    }
    runnable = [
        catalog.weight_format(name)
        for name, level in levels.items()
        if LEVELS[level] != "unsupported"
    ]
    return sorted(runnable, key=lambda f: (levels[f.id], -f.linear_bits_per_weight, f.id))


def _change_that_fits(
    req: DeploymentRequest, dep: Deployment, catalog: Catalog, ask: Ask
) -> tuple[str | None, str | None]:
    quant = next(
        (
            f.id
            for f in _lighter_formats(catalog, dep)
            if _fits_with(replace(req, target_quant=f.id), catalog, dep.engine, ask)
        ),
        None,
    )
    narrower = [
        k
        for k in catalog.kv_dtypes.records.values()
        if k.bytes_per_element < dep.kv_dtype.bytes_per_element
    ]
    kv_dtypes = sorted(narrower, key=lambda k: (-k.bytes_per_element, k.id))
    kv = next(
        (
            k.id
            for k in kv_dtypes
            if _fits_with(replace(req, kv_dtype=k.id), catalog, dep.engine, ask)
        ),
        None,
    )
    return quant, kv


def fit_limits(req: DeploymentRequest, dep: Deployment, catalog: Catalog, ask: Ask) -> FitLimits:
    numbers, engine = dep.numbers, dep.engine
    heads = dep.target.model.num_attention_heads
    tps = [tp for tp in TP_SIZES if heads % tp == 0]
    min_tp = next((tp for tp in tps if _fits_with(replace(req, tp=tp), catalog, engine, ask)), None)
    limits = FitLimits(
        max_fitting_context_length=max_fitting_context(
            numbers,
            engine,
            ask.batch_size,
            ask.k,
            dep.target.model.max_position_embeddings,
            tree=ask.tree,
        ),
        max_fitting_batch_size=max_fitting_batch(
            numbers, engine, ask.context_length, ask.k, MAX_BATCH, tree=ask.tree
        ),
        min_fitting_tp=min_tp,
    )
    if _fits(dep, ask):
        return limits
    quant, kv = _change_that_fits(req, dep, catalog, ask)
    return replace(limits, fitting_target_quant=quant, fitting_kv_dtype=kv)
