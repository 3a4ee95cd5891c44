"""Catalogs and checkpoints (YAML, config.json, safetensors, GGUF, Hub) as typed records.

The bottom layer: it imports nothing else of infersize but its errors.
"""

from infersize.catalog.records import ComponentBytes, Gpu, KvDtype, Mla, Model, Moe, WeightFormat
from infersize.catalog.store import Catalog, load_catalog

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
