"""Shell completion of the names options take (Typer's `autocompletion`): models, GPUs, KV
cache dtypes, engines and methods. The catalog loads only when the shell asks for a completion."""

from __future__ import annotations

from collections.abc import Iterable

from infersize.core.engines import ENGINES
from infersize.core.methods import METHODS


def _starting(names: Iterable[str], incomplete: str) -> list[str]:
    start = incomplete.lower()
    return sorted({n for n in names if n.lower().startswith(start)})


def _catalog_names(kind: str) -> list[str]:
    from infersize.catalog.store import load_catalog

    try:
        table = getattr(load_catalog(), kind)
    except Exception:
        return []
    return [n for n in table.names if "/" not in n]  # ids and aliases


def complete_model(incomplete: str) -> list[str]:
    return _starting(_catalog_names("models"), incomplete)


def complete_drafter(incomplete: str) -> list[str]:
    return _starting([*_catalog_names("models"), "ngram", "none"], incomplete)


def complete_gpu(incomplete: str) -> list[str]:
    return _starting(_catalog_names("gpus"), incomplete)


def complete_kv_dtype(incomplete: str) -> list[str]:
    return _starting(_catalog_names("kv_dtypes"), incomplete)


def complete_engine(incomplete: str) -> list[str]:
    return _starting(ENGINES, incomplete)


def complete_method(incomplete: str) -> list[str]:
    return _starting(METHODS, incomplete)
