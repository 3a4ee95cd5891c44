"""The capacity axes of a sweep file: named workloads, named SLAs, the fleet's target request
rates, and how the capacity table is computed. A sweep with `workloads` and `slas` also writes
capacity.parquet/.csv (sweep/capacity/table.py).

  workloads:
    - {name: chat, input_tokens: 512, output_tokens: 256, arrival: poisson}
    - {name: rag, lengths: traces/rag.parquet, target_request_rates: [20]}
  slas:
    interactive: "ttft:p99<=500ms;tpot:p99<=40ms"
  target_request_rates: [10, 100]
  capacity: {requests: 1000, seed: 0, simulate_top: 3, headroom: 1.0, simulate_all: false}
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from infersize.bounds import (
    ANSWER_TOKENS,
    HEADROOM,
    PROMPT_TOKENS,
    REQUESTS,
    SEED,
    TARGET_REQUEST_RATE,
)
from infersize.catalog.workload_kinds import workload_kind
from infersize.core.serving.interval import REPLICATIONS
from infersize.core.serving.sla import check_requests, parse_sla
from infersize.core.serving.traffic import parse_arrival
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _positive_rates(rates: list[float] | None) -> list[float] | None:
    if rates is not None:
        if not rates:
            raise ValueError("needs at least one rate")
        if not all(TARGET_REQUEST_RATE.contains(r) for r in rates):
            raise ValueError(f"request rates must be numbers in {TARGET_REQUEST_RATE.range_text()}")
    return rates


class WorkloadEntry(_Strict):
    """One named workload: lengths as means (every request the same) or a trace file, the
    arrival process, and optionally its own target request rates."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    input_tokens: int | None = PROMPT_TOKENS.schema_field(None)
    output_tokens: int | None = ANSWER_TOKENS.schema_field(None)
    lengths: str | None = None  # a trace, relative to the sweep file's folder
    arrival: str = DEFAULTS.arrival
    target_request_rates: list[float] | None = None
    kind: str | None = None  # the traffic's kind (chat, code, ...); None: the sweep's

    @model_validator(mode="after")
    def _lengths_one_way(self) -> WorkloadEntry:
        means = self.input_tokens is not None or self.output_tokens is not None
        if self.lengths is not None and means:
            raise ValueError("give lengths (a trace file) or input_tokens/output_tokens, not both")
        if self.lengths is None and (self.input_tokens is None or self.output_tokens is None):
            raise ValueError("needs input_tokens and output_tokens, or lengths (a trace file)")
        return self

    @field_validator("arrival")
    @classmethod
    def _known_arrival(cls, text: str) -> str:
        try:
            return parse_arrival(text).label
        except InfersizeError as exc:
            raise ValueError(str(exc).removeprefix("arrival ")) from None

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str | None) -> str | None:
        return None if kind is None else known_workload_kind(kind)

    @field_validator("target_request_rates")
    @classmethod
    def _rates(cls, rates: list[float] | None) -> list[float] | None:
        return _positive_rates(rates)


class CapacityOptions(_Strict):
    requests: int = REQUESTS.schema_field(DEFAULTS.capacity_requests)
    seed: int = SEED.schema_field(DEFAULTS.seed)
    # rows per (GPU, target, workload, SLA) the simulator confirms, besides the rows near an
    # SLA edge (where speculation's saving of GPUs could flip)
    simulate_top: int = Field(default=DEFAULTS.capacity_simulate_top, ge=0, le=1000)
    # the simulator answers every row (slower: what the screen's choice of rows is checked by)
    simulate_all: bool = False
    headroom: float = HEADROOM.schema_field(DEFAULTS.headroom)
    # capacity searches under independent draws: the mean answers, their spread is its range
    replications: int = REPLICATIONS.schema_field(DEFAULTS.capacity_replications)
    # the capacity table's rows a sweep may hold, each a capacity search (sweep/size.py)
    max_rows: int = Field(default=DEFAULTS.capacity_max_rows, ge=1)


def known_workload_kind(text: str) -> str:
    """A workload kind as --workload-kind reads it (the message is the registry's)."""
    try:
        return workload_kind(text)
    except InfersizeError as exc:
        raise ValueError(str(exc)) from None


def _parses(text: str) -> str:
    """An SLA as `capacity --sla` reads it (the message is parse_sla's)."""
    try:
        parse_sla(text)
    except InfersizeError as exc:
        raise ValueError(str(exc).removeprefix("sla ")) from None
    return text


SlaText = Annotated[str, AfterValidator(_parses)]


def check_workloads(workloads: list[WorkloadEntry] | None) -> list[WorkloadEntry] | None:
    """Workload names that differ (they name the capacity table's rows)."""
    names = [w.name for w in workloads or ()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"workload name '{twice[0]}' is used twice; names must differ")
    return workloads


def check_slas(
    slas: dict[str, str] | None, workloads: list[WorkloadEntry] | None
) -> dict[str, str] | None:
    """At least one SLA, each named by a plain word; SLAs and workloads come together."""
    if slas is None:
        if workloads is not None:
            raise ValueError("workloads need slas: name at least one latency target")
        return None
    if workloads is None:
        raise ValueError("slas need workloads: name at least one workload")
    if not slas:
        raise ValueError("needs at least one named SLA")
    for name in slas:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
            raise ValueError(f"SLA name '{name}' must be a word of 1 to 64 letters, digits, . _ -")
    _no_vacuous_terms(slas, workloads)
    return slas


def _no_vacuous_terms(slas: dict[str, str], workloads: list[WorkloadEntry]) -> None:
    """A TPOT or ITL term on one-token answers: no request can break it, so its capacity
    would mean nothing."""
    for workload in workloads:
        if workload.output_tokens != 1:
            continue
        for name, text in slas.items():
            for term in parse_sla(text).terms:
                if term.metric in ("tpot", "itl"):
                    raise ValueError(
                        f"SLA '{name}' limits {term.metric}, but every answer of workload "
                        f"'{workload.name}' is one token: no request has one (answers need at "
                        "least 2 tokens)"
                    )


def check_requests_per_run(
    capacity: CapacityOptions, slas: dict[str, str] | None
) -> CapacityOptions:
    """Enough requests per run for every statistic an SLA asks of them."""
    for name, text in (slas or {}).items():
        try:
            check_requests(parse_sla(text), capacity.requests)
        except InfersizeError as exc:
            raise ValueError(str(exc).replace("the SLA term", f"SLA '{name}', term")) from None
    return capacity


def check_target_rates(
    rates: list[float] | None, workloads: list[WorkloadEntry] | None
) -> list[float] | None:
    """Positive rates, present unless every workload has its own."""
    missing = [w.name for w in workloads or () if w.target_request_rates is None]
    if rates is None and missing:
        raise ValueError(
            f"workload(s) {', '.join(missing)} need target_request_rates (theirs, or "
            "target_request_rates for every workload)"
        )
    return _positive_rates(rates)
