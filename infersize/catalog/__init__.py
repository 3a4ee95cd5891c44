"""Catalogs and checkpoints (YAML, config.json, safetensors, GGUF, Hub) as typed records.

The bottom layer: it imports nothing else of infersize but its errors. The face imports its
modules when a name is first asked for, so the command line's registries (workload kinds)
load without the records and the store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infersize.catalog.records import (
        ComponentBytes,
        Gpu,
        KvDtype,
        Mla,
        Model,
        Moe,
        WeightFormat,
    )
    from infersize.catalog.store import Catalog, load_catalog

_HOME = {
    "Catalog": "store",
    "load_catalog": "store",
    **dict.fromkeys(
        ("ComponentBytes", "Gpu", "KvDtype", "Mla", "Model", "Moe", "WeightFormat"), "records"
    ),
}

__all__ = [
    "Catalog",
    "ComponentBytes",
    "Gpu",
    "KvDtype",
    "Mla",
    "Model",
    "Moe",
    "WeightFormat",
    "load_catalog",
]


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
