"""A capacity request: the deployment (as `spec` takes it), the traffic (lengths, load,
arrival process, requests per run, seed) and the question (SLA, target rate, headroom,
replications), with the ranges its numbers must lie in, checked once, and the deployment it
resolves to."""

from __future__ import annotations

from dataclasses import field

from infersize.bounds import (
    ANSWER_TOKENS,
    CONCURRENCY,
    HEADROOM,
    PROMPT_TOKENS,
    REQUEST_RATE,
    REQUESTS,
    SEED,
    TARGET_REQUEST_RATE,
)
from infersize.catalog.store import Catalog
from infersize.core.serving.interval import REPLICATIONS
from infersize.core.serving.sla import Sla, check_requests
from infersize.core.serving.traffic import Arrival
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, ValueRangeError
from infersize.record import record
from infersize.service.request import Prepared, SpecRequest, prepare


@record
class Traffic:
    """The requests: lengths (one pair of means, or a trace replayed in order), and the load."""

    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    lengths_file: str | None = None
    request_rate: float | None = None  # open loop, requests per second
    concurrency: int | None = None  # closed loop: clients
    arrival: Arrival = field(default_factory=Arrival)
    requests: int = DEFAULTS.capacity_requests
    seed: int = DEFAULTS.seed
    replication: int = 0  # independent draws under the same seed (0: the seed's own)


@record
class CapacityRequest:
    spec: SpecRequest  # the deployment, engine and acceptance, as `spec` takes them
    draft_k_auto: bool = False  # choose the K that serves the load best (0: no speculation)
    traffic: Traffic
    sla: Sla | None = None
    target_request_rate: float | None = None
    headroom: float = DEFAULTS.headroom
    replications: int = DEFAULTS.capacity_replications  # capacity searches under other draws
    tp_auto: bool = False  # each arm at the tensor-parallel size of fewest GPUs
    engine_by_default: bool = False  # the engine is capacity's default, not the user's
    k_schedule: str | None = None  # K by the running batch: auto, or a file holding the table
    # the inter-token latencies at the load (False: left out, NaN; a capacity sweep reads none,
    # and they cost more to compute than the run they are computed from)
    itl_at_load: bool = True


def validate_traffic(traffic: Traffic, target_request_rate: float | None = None) -> None:
    if traffic.request_rate is not None and traffic.concurrency is not None:
        raise ValueRangeError(
            "request_rate", "or {concurrency} sets the load: give one of them, not both"
        )
    if traffic.request_rate is None and traffic.concurrency is None and not target_request_rate:
        raise ValueRangeError(
            "request_rate",
            "or {concurrency} sets the load (or {target_request_rate}, measured at each "
            "replica's share of it)",
        )
    if traffic.request_rate is not None:
        REQUEST_RATE.check(traffic.request_rate)
    if traffic.concurrency is not None:
        CONCURRENCY.check(traffic.concurrency)
    REQUESTS.check(traffic.requests)
    SEED.check(traffic.seed)
    if not traffic.input_tokens or len(traffic.input_tokens) != len(traffic.output_tokens):
        raise ValueRangeError("input_tokens", "and {output_tokens} need one length each")
    for bound, lengths in (
        (PROMPT_TOKENS, traffic.input_tokens),
        (ANSWER_TOKENS, traffic.output_tokens),
    ):
        for value in (min(lengths), max(lengths)):
            bound.check(value)


class UnservableError(InfersizeError):
    """The deployment cannot serve at all: the GPU cannot run its precisions, or its weights
    leave no room for a KV cache (an answer of zero capacity in a sweep, not a failure)."""


class NoKvRoomError(UnservableError):
    """The weights (with the draft's, at K > 0) leave no room for a KV cache, or at K > 0 too
    little for the longest request."""


def _check_vacuous(req: CapacityRequest) -> None:
    """An SLA term no request can break (a TPOT or ITL limit where every answer is one token:
    no request has a TPOT) would make every answer meaningless: refuse it."""
    if req.sla is None or max(req.traffic.output_tokens) > 1:
        return
    for term in req.sla.terms:
        if term.metric in ("tpot", "itl"):
            raise ValueRangeError(
                "sla",
                f"term '{term}' limits the time between tokens, but every answer is one token: "
                "no request has one (answers need at least 2 tokens, {output_tokens})",
            )


def prepare_capacity(req: CapacityRequest, catalog: Catalog) -> Prepared:
    validate_traffic(req.traffic, req.target_request_rate)
    if req.target_request_rate is not None and req.sla is None:
        raise ValueRangeError(
            "target_request_rate",
            "needs {sla}: the latency target decides what one replica serves, and so how many "
            "it takes",
        )
    REPLICATIONS.check(req.replications)
    HEADROOM.check(req.headroom)
    if req.target_request_rate is not None:
        TARGET_REQUEST_RATE.check(req.target_request_rate)
    _check_vacuous(req)
    if req.sla is not None:
        check_requests(req.sla, req.traffic.requests)
    prepared = prepare(req.spec, catalog)
    if prepared.deployment.support.level == "unsupported":
        raise UnservableError(
            f"{prepared.deployment.gpu.name} cannot run this deployment: "
            f"{prepared.deployment.support.reason}"
        )
    return prepared
