"""Serving one replica, as pure maths: the requests (traffic), the replica the scheduler sees
(replica), the time of one engine step (step: the one step model `spec` prices its decode step
with too), the step-by-step simulation (simulate; its loop in loop: at one K, or with K
switched by the running batch) and its fast mean-field stand-in (meanfield),
what a run measured (metrics), latency targets (sla) and how far a simulated answer moves with
the seed (interval). No I/O; numpy only.

The face is lazy: `from infersize.core.serving import mean_field` imports the mean-field model
when asked, not when the package is, so nothing here weighs on a command that does not serve
(a name that is also a module's, such as `simulate`, is imported from its module)."""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it
_FACE = {
    "Arrival": "traffic",
    "parse_arrival": "traffic",
    "Replica": "replica",
    "Load": "replica",
    "Run": "replica",
    "KSwitch": "replica",
    "step_table": "step",
    "engine_step_seconds": "step",
    "mean_field": "meanfield",
    "sustained_rate": "meanfield",
    "Stats": "metrics",
    "ServingMetrics": "metrics",
    "sla_breaches": "metrics",
    "Sla": "sla",
    "parse_sla": "sla",
    "prediction_interval": "interval",
}


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
