"""Serving capacity, the service: how many GPUs a load needs at a latency target, with and
without speculation.

  request   the question: deployment, traffic, SLA, target rate; its ranges, checked once
  arm       one way of serving it (K = 0, or speculation at K) as a replica the simulator serves
  search    the highest stable rate meeting the SLA, over independent replications
  fleet     replicas, GPUs and dollars a target rate needs at a capacity
  answer    the answer as data: both arms, their capacities, ranges, floors and fleets
  result    `infersize capacity`'s answer (run_capacity) and its JSON
  layouts   --tp auto: each arm at its tensor-parallel size of fewest GPUs
  floor     what lifts an arm off its latency floor
  notes     what an answer rests on, and how far it can be trusted
  screen    a capacity sweep's rows: screened by the mean-field model, simulated where it counts
  curves    latency against request rate, for the figures

The face is lazy: a name is imported from its module when asked."""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it
_FACE = {
    "CapacityRequest": "request",
    "Traffic": "request",
    "UnservableError": "request",
    "prepare_capacity": "request",
    "CapacityResult": "answer",
    "ArmResult": "answer",
    "run_capacity": "result",
    "capacity_json": "result",
    "run_capacity_tp_auto": "layouts",
    "capacity_curves": "curves",
}


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
