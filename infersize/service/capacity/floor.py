"""What lifts a deployment off its latency floor: when one request alone already uses most of an
SLA term, the same arm one or two tensor-parallel sizes up, or on a GPU with as much memory and
more bandwidth, served one request at a time, until one stays below the floor's share."""

from __future__ import annotations

import dataclasses

from infersize.catalog.store import Catalog
from infersize.core.deployment import tensor_parallel_sizes
from infersize.core.serving.metrics import latency_floor
from infersize.service.capacity.arm import make_arm
from infersize.service.capacity.request import CapacityRequest, UnservableError, prepare_capacity
from infersize.service.capacity.search import alone

GPU_TRIES = 3  # faster GPUs tried, slowest first


def _clears(req: CapacityRequest, catalog: Catalog, draft_k: int, tp: int, gpu: str) -> bool:
    """Whether the arm at `tp` on `gpu` keeps one request alone below the floor's share."""
    deployment = dataclasses.replace(req.spec.deployment, tp=tp, gpu=gpu)
    moved = dataclasses.replace(req, spec=dataclasses.replace(req.spec, deployment=deployment))
    try:
        prepared = prepare_capacity(moved, catalog)
        arm = make_arm(prepared, moved.traffic, draft_k)
    except UnservableError:
        return False
    assert req.sla is not None
    return not latency_floor(alone(arm, moved.traffic, itl=req.sla.reads_itl), req.sla).near_floor


def floor_remedy(req: CapacityRequest, catalog: Catalog, draft_k: int, tp: int) -> str | None:
    """'TP 4 or an NVIDIA H200 clears it', or what of the two does; None when neither does."""
    prepared = prepare_capacity(req, catalog)
    dep = prepared.deployment
    heads = dep.target.model.num_attention_heads
    gpu = dep.gpu.id
    larger = [size for size in tensor_parallel_sizes(heads) if size > tp]
    by_tp = next((size for size in larger if _clears(req, catalog, draft_k, size, gpu)), None)
    faster = sorted(
        (
            g
            for g in catalog.gpus.records.values()
            if g.vendor == dep.gpu.vendor
            and g.memory_bytes >= dep.gpu.memory_bytes
            and g.bandwidth_gb_per_s > dep.gpu.bandwidth_gb_per_s
        ),
        key=lambda g: (g.bandwidth_gb_per_s, g.id),
    )[:GPU_TRIES]
    by_gpu = next((g for g in faster if _clears(req, catalog, draft_k, tp, g.id)), None)
    cures = ([f"TP {by_tp}"] if by_tp else []) + ([f"an {by_gpu.name}"] if by_gpu else [])
    if not cures:
        return None
    return f"{' or '.join(cures)} clears it"
