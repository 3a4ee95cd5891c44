"""What a capacity sweep computes once and reuses gives what computing it again gives: an arm's
mean-field capacity at an SLA (kept by replica, lengths and SLA, the replica held weakly) and
the K schedule's switching replica (kept in the chunk's replica cache by deployment, table and
cost)."""

from __future__ import annotations

import dataclasses
import gc

from infersize.core.serving.meanfield import _MODELS, sustained_rate
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.arm import (
    _SCREENED,
    make_arm,
    mean_field_capacity,
    screen_score,
)
from infersize.service.capacity.kschedule import switching_arm
from infersize.service.capacity.request import CapacityRequest, Traffic
from tests.support.serving import INPUT, OUTPUT, prepared_for

TRAFFIC = Traffic(input_tokens=(INPUT,), output_tokens=(OUTPUT,), request_rate=1.0)
SLA = parse_sla("ttft:p99<=500ms;tpot:p99<=15ms")


def _fresh(arm) -> float:
    return mean_field_capacity(arm, SLA, sustained_rate(arm.replica, arm.lengths))


def test_an_arms_screen_is_kept_by_its_replica_lengths_and_sla(catalog):
    prepared = prepared_for(catalog)
    replicas: dict = {}
    arm = make_arm(prepared, TRAFFIC, 3, replicas)
    first = screen_score(arm, TRAFFIC, SLA)
    assert first == _fresh(arm)
    assert (id(arm.replica), arm.lengths, SLA) in _SCREENED
    again = make_arm(prepared, TRAFFIC, 3, replicas)  # another arm, the same replica
    assert again.replica is arm.replica and screen_score(again, TRAFFIC, SLA) == first
    other_sla = parse_sla("ttft:p99<=2000ms;tpot:p99<=40ms")
    assert screen_score(arm, TRAFFIC, other_sla) > first  # a looser SLA: its own entry
    k1 = make_arm(prepared, TRAFFIC, 1, replicas)
    assert screen_score(k1, TRAFFIC, SLA) == _fresh(k1)  # another replica: its own entry


def test_a_screen_never_outlives_its_replica(catalog):
    """An entry whose replica is gone answers nothing, even for a replica that takes its id
    (the mean-field models kept for the last few replicas let go of theirs first)."""
    arm = make_arm(prepared_for(catalog), TRAFFIC, 3)
    screen_score(arm, TRAFFIC, SLA)
    key = next(k for k in _SCREENED if k[0] == id(arm.replica))
    ref = _SCREENED[key][0]
    assert ref() is arm.replica
    del arm
    _MODELS.clear()
    gc.collect()
    assert ref() is None
    twin = make_arm(prepared_for(catalog), TRAFFIC, 3)
    assert screen_score(twin, TRAFFIC, SLA) == _fresh(twin)


def test_the_switching_replica_is_built_once_per_table_and_cost(catalog):
    prepared = prepared_for(catalog)
    request = CapacityRequest(spec=prepared.request, traffic=TRAFFIC, sla=SLA)
    ranges = ((1, 8, 3), (9, 64, 2), (65, 1 << 30, 1))
    cache: dict = {}
    arm, costly = switching_arm(prepared, request, ranges, cache)
    again, _ = switching_arm(prepared, request, ranges, cache)
    assert again.replica is arm.replica  # the chunk's cache holds it
    alone, alone_costly = switching_arm(prepared, request, ranges)
    assert alone.replica == arm.replica and alone_costly == costly
    other, _ = switching_arm(prepared, request, (*ranges[:2], (65, 1 << 30, 2)), cache)
    assert other.replica is not arm.replica
    assert dataclasses.replace(arm, replica=alone.replica) == alone
