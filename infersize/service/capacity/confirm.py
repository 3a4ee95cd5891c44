"""A capacity sweep's rows, answered: every row screened (service/capacity/screen.py), then per
group of rows that compete (a GPU type, target, workload and SLA) the simulator answers the rows
the screen cannot stand for, those near an edge, and the group's leaders; each row's break-even
rate beside its answer."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Hashable
from typing import TypeVar

from infersize.catalog.store import Catalog
from infersize.record import record
from infersize.service.capacity.breakeven import break_even_rate
from infersize.service.capacity.fleet import replicas_for
from infersize.service.capacity.request import CapacityRequest, UnservableError, prepare_capacity
from infersize.service.capacity.screen import (
    RowAnswer,
    RowArm,
    RowCache,
    near_edge,
    screen_row,
    simulate_row,
)


def _speculative_per_gpu(answer: RowAnswer, tp: int) -> float:
    """What ranks a row in its group: requests/s per GPU with speculation, the fewest GPUs at
    any rate above one replica's capacity."""
    return answer.speculative.max_request_rate / tp


@record
class Row:
    """A row's question: the `capacity --draft-k auto` request, the target rates its answer is
    priced at, the group of rows it competes in, and its GPUs per replica (for ranking)."""

    request: CapacityRequest
    rates: tuple[float, ...]
    group: Hashable
    tp: int


NOTHING = RowArm(max_request_rate=0.0, interval=None, latency_ms={})
NO_ROOM = RowAnswer(draft_k=0, baseline=NOTHING, speculative=NOTHING, simulated=False)


def _screened(row: Row, catalog: Catalog, cache: RowCache) -> RowAnswer:
    try:
        prepared = prepare_capacity(row.request, catalog)
        return screen_row(prepared, row.request, row.rates, cache)
    except UnservableError:  # the GPU cannot run it, or the target leaves no room for a KV cache
        return NO_ROOM


def answer_rows(
    rows: list[Row],
    catalog: Catalog,
    simulate_top: int,
    headroom: float,
    simulate_all: bool = False,
) -> list[RowAnswer]:
    """Every row screened (plain decoding simulated, speculation by the mean-field model),
    then per group the simulator answers every row the screen cannot stand for or near an edge,
    and the `simulate_top` rows of most requests/s per GPU with speculation (what `best
    --request-rate` picks from at any rate) and at each target rate the `simulate_top` rows it
    ranks first there (rate_leaders) until those leaders are all simulated: a screened
    row that a simulated leader falls behind is simulated next, and so is one that ties a
    leader (rows screened at K = 0 tie every other of their deployment at plain decoding's
    capacity; the simulator may find any of them speculating a hair above it, and `best`
    takes the higher capacity of a tie).
    `simulate_all`: the simulator answers every row (what the screen's choice is measured
    against)."""
    cache = RowCache()
    answers = [_screened(row, catalog, cache) for row in rows]
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if answers[i] is not NO_ROOM:
            groups[row.group].append(i)
    simulated: set[int] = set()

    def confirm(chosen: set[int]) -> None:
        for i in sorted(chosen - simulated):
            answers[i] = simulate_row(rows[i].request, catalog, rows[i].rates, cache)
            simulated.add(i)

    for members in groups.values():
        confirm(
            {
                i
                for i in members
                if simulate_all
                or answers[i].unsure
                or near_edge(answers[i], rows[i].rates, headroom)
            }
        )
        while True:
            ranked = {i: _speculative_per_gpu(answers[i], rows[i].tp) for i in members}
            chosen = leaders(ranked, simulate_top) | rate_leaders(
                members, answers, rows, headroom, simulate_top
            )
            if chosen <= simulated:
                break
            confirm(chosen)
    return [
        _with_break_even(row, answer, catalog, cache)
        for row, answer in zip(rows, answers, strict=True)
    ]


def rate_leaders(
    members: list[int],
    answers: list[RowAnswer],
    rows: list[Row],
    headroom: float,
    simulate_top: int,
) -> set[int]:
    """At each of the group's target rates, the `simulate_top` rows `best --request-rate`
    ranks first there: the fewest GPUs with speculation, then the most requests/s per
    replica. Whole replicas make the per-GPU ranking miss some: at 5 requests/s a TP 1
    replica of 0.56 requests/s needs 9 GPUs where a TP 2 replica of 1.23 needs 10."""
    chosen: set[int] = set()
    for rate in sorted({rate for i in members for rate in rows[i].rates}):
        fewest = {}
        for i in members:
            capacity = answers[i].speculative.max_request_rate
            replicas = replicas_for(rate, capacity, headroom)
            if replicas is not None and rate in rows[i].rates:
                fewest[i] = (replicas * rows[i].tp, -capacity)
        chosen |= _first_with_ties(fewest, simulate_top)
    return chosen


def leaders(scores: dict[int, float], simulate_top: int) -> set[int]:
    """The `simulate_top` rows of the highest scores (ties to the lower index), and every row
    that ties one of them."""
    return _first_with_ties({i: -score for i, score in scores.items()}, simulate_top)


Rank = TypeVar("Rank", float, tuple[int, float])


def _first_with_ties(ranks: dict[int, Rank], n: int) -> set[int]:
    """The `n` rows of the lowest ranks (ties to the lower index), and every row that ties
    one of them."""
    top = set(sorted(ranks, key=lambda i: (ranks[i], i))[:n])
    tied = {ranks[i] for i in top}
    return top | {i for i, rank in ranks.items() if rank in tied}


def _with_break_even(row: Row, answer: RowAnswer, catalog: Catalog, cache: RowCache) -> RowAnswer:
    if answer is NO_ROOM:
        return answer
    prepared = prepare_capacity(row.request, catalog)
    rate = break_even_rate(prepared, row.request, answer.draft_k, cache.replicas)
    return dataclasses.replace(answer, break_even_request_rate=rate)
