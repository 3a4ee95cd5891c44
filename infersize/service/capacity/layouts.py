"""`capacity --tp auto`: each arm at the tensor-parallel size that serves the load on the fewest
GPUs. The sizes tried are those of one node (1, 2, 4, 8) that divide the target's attention
heads (vLLM's rule); a size whose weights leave no room for a KV cache is skipped.

Every size is answered first by one replication (the search `--draft-k auto` compares), which
ranks them; the sizes within RUNNER_UP of the best are then answered in full, exactly as
`capacity --tp N` answers them, and the best of those is the arm's layout: the fewest GPUs for
the target rate (ties: fewer dollars, then fewer GPUs per replica), or without a target rate
the most requests/s per GPU.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from infersize.catalog.store import Catalog
from infersize.core.deployment import tensor_parallel_sizes
from infersize.service.capacity.answer import ArmResult, CapacityResult
from infersize.service.capacity.request import CapacityRequest, UnservableError, prepare_capacity
from infersize.service.capacity.result import run_capacity

RUNNER_UP = 1.25  # sizes whose one-replication cost is within this of the best are run in full


def tp_sizes(req: CapacityRequest, catalog: Catalog) -> list[int]:
    """The sizes of one node that divide the target's attention heads."""
    model = prepare_capacity(req, catalog).deployment.target.model
    return tensor_parallel_sizes(model.num_attention_heads)


def at_tp(req: CapacityRequest, tp: int, replications: int | None = None) -> CapacityRequest:
    deployment = dataclasses.replace(req.spec.deployment, tp=tp)
    return dataclasses.replace(
        req,
        spec=dataclasses.replace(req.spec, deployment=deployment),
        tp_auto=False,
        replications=req.replications if replications is None else replications,
    )


def _cost(req: CapacityRequest, arm: ArmResult | None) -> tuple[float, float, int]:
    """How an arm ranks (lower is better): GPUs and dollars for the target rate, else GPUs per
    request/s; then its GPUs per replica."""
    if arm is None or arm.capacity is None or arm.capacity.max_request_rate <= 0:
        return (math.inf, math.inf, arm.tp if arm else 0)
    if req.target_request_rate is None or arm.fleet is None or arm.fleet.gpus is None:
        return (arm.tp / arm.capacity.max_request_rate, 0.0, arm.tp)
    usd = arm.fleet.usd_per_hour
    return (float(arm.fleet.gpus), math.inf if usd is None else usd, arm.tp)


Pick = Callable[[CapacityResult], "ArmResult | None"]


def _serve(
    req: CapacityRequest, catalog: Catalog, sizes: list[int], replications: int | None
) -> dict[int, CapacityResult]:
    results: dict[int, CapacityResult] = {}
    for tp in sizes:
        try:
            results[tp] = run_capacity(at_tp(req, tp, replications), catalog)
        except UnservableError:  # no room for a KV cache at this size
            continue
    return results


def _contenders(req: CapacityRequest, firsts: dict[int, CapacityResult], pick: Pick) -> set[int]:
    costs = {tp: _cost(req, pick(result))[0] for tp, result in firsts.items()}
    best = min(costs.values())
    if not math.isfinite(best):
        return set(costs)
    return {tp for tp, cost in costs.items() if cost <= best * RUNNER_UP}


def run_capacity_tp_auto(req: CapacityRequest, catalog: Catalog) -> CapacityResult:
    sizes = tp_sizes(req, catalog)
    firsts = _serve(req, catalog, sizes, replications=1)
    if not firsts:
        raise UnservableError(
            f"no tensor-parallel size of {', '.join(map(str, sizes))} leaves room for a KV "
            "cache beside the weights: use a lighter precision or a larger GPU"
        )
    wanted = _contenders(req, firsts, lambda r: r.baseline)
    wanted |= _contenders(req, firsts, lambda r: r.speculative)
    full = _serve(req, catalog, sorted(wanted), replications=None)
    base_tp = min(full, key=lambda tp: _cost(req, full[tp].baseline))
    spec_tp = min(full, key=lambda tp: _cost(req, full[tp].speculative))
    frame = full[spec_tp]
    searched = ", ".join(str(tp) for tp in sizes)
    note = (
        f"--tp auto: TP {searched} searched; plain decoding is at TP {base_tp}"
        + ("" if frame.speculative is None else f", speculation at TP {spec_tp}")
        + f" (the fewest GPUs; sizes within {RUNNER_UP - 1:.0%} of the best answered in full)"
    )
    result: CapacityResult = dataclasses.replace(
        frame, baseline=full[base_tp].baseline, notes=(note, *frame.notes)
    )
    return result
