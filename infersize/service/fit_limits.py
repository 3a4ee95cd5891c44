"""What would fit: the longest context, the largest batch, the smallest tensor parallelism, and
the least change of precision or KV dtype at which a deployment fits in memory."""

from __future__ import annotations

from dataclasses import replace

from infersize.catalog.records import KvDtype, WeightFormat
from infersize.catalog.store import Catalog
from infersize.core.deployment import tensor_parallel_sizes
from infersize.core.engines import Engine
from infersize.core.fit import deployment_memory
from infersize.core.limits import max_fitting_batch, max_fitting_context
from infersize.core.tree import CHAIN, Tree
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.service.resolve import LEVELS, Deployment, DeploymentRequest, resolve_deployment

MAX_BATCH = 1 << 20  # far past any engine's max_num_seqs


@record
class FitLimits:
    max_fitting_context_length: int | None  # at the batch and K asked; None: not even 1 token
    max_fitting_batch_size: int | None  # at the context and K asked; None: not even 1 sequence
    min_fitting_tp: int | None  # smallest of 1, 2, 4, 8 that fits; None: none does
    # when it does not fit: the least change of weight format and KV dtype (searched together)
    # that fits, each None where it stays as asked
    fitting_target_quant: str | None = None
    fitting_kv_dtype: str | None = None


@record(kw_only=False)
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


def _engine_runs(families: list[str], family: str) -> bool:
    return not families or family in families


def _lighter_formats(catalog: Catalog, dep: Deployment) -> list[tuple[int, WeightFormat]]:
    """The target's format and those of fewer bits that the engine loads (its own checkpoint
    formats) and the GPU runs, each with its support level (0 native)."""
    current, family = dep.target.fmt, dep.engine.support_family
    out = []
    for f in catalog.weight_formats.records.values():
        lighter = f.linear_bits_per_weight < current.linear_bits_per_weight
        if f.id != current.id and not (lighter and _engine_runs(f.engine_families, family)):
            continue
        level = LEVELS.index(catalog.support(f.id, dep.gpu, family).level)
        if LEVELS[level] != "unsupported":
            out.append((level, f))
    return out


def _narrower_kv(catalog: Catalog, dep: Deployment) -> list[KvDtype]:
    """The KV dtype and the narrower ones the engine caches in."""
    current, family = dep.kv_dtype, dep.engine.support_family
    return [
        k
        for k in catalog.kv_dtypes.records.values()
        if k.id == current.id
        or (
            k.bytes_per_element < current.bytes_per_element
            and _engine_runs(k.engine_families, family)
        )
    ]


def _change_that_fits(
    req: DeploymentRequest, dep: Deployment, catalog: Catalog, ask: Ask
) -> tuple[str | None, str | None]:
    """The least change of weight format and KV dtype, searched together, that fits: formats
    the GPU runs natively first, then the most weight bits, then the widest KV dtype. Each is
    None when it stays as asked."""
    options = sorted(
        (
            (level, f, k)
            for level, f in _lighter_formats(catalog, dep)
            for k in _narrower_kv(catalog, dep)
        ),
        key=lambda o: (o[0], -o[1].linear_bits_per_weight, -o[2].bytes_per_element, o[1].id),
    )
    for _, fmt, kv in options:
        if (fmt.id, kv.id) == (dep.target.fmt.id, dep.kv_dtype.id):
            continue
        if _fits_with(replace(req, target_quant=fmt.id, kv_dtype=kv.id), catalog, dep.engine, ask):
            quant = None if fmt.id == dep.target.fmt.id else fmt.id
            return quant, None if kv.id == dep.kv_dtype.id else kv.id
    return None, None


def fit_limits(req: DeploymentRequest, dep: Deployment, catalog: Catalog, ask: Ask) -> FitLimits:
    numbers, engine = dep.numbers, dep.engine
    heads = dep.target.model.num_attention_heads
    tps = tensor_parallel_sizes(heads)
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
