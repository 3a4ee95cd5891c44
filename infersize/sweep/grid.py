"""The settings of a sweep: every (gpu, tp, target, target precision, KV dtype, draft, draft
precision) that can run, each GPU's tensor-parallel sizes (a list, or auto: those of one node
that divide the target's heads) and each drafter's precisions, in the tables' order; what cannot
run (a size that does not divide the heads, a precision the GPU cannot run) is counted."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from itertools import product
from operator import attrgetter
from typing import Any

from infersize.catalog.records import Model
from infersize.catalog.store import Catalog
from infersize.catalog.yamlfile import YamlDocument
from infersize.core.deployment import TP_SIZES, tensor_parallel_sizes
from infersize.core.engines import get_engine
from infersize.core.methods import method_of
from infersize.errors import SweepConfigError
from infersize.service.context import max_context_tokens
from infersize.service.resolve import combined_support
from infersize.sweep.config import GpuEntry, SweepConfig
from infersize.sweep.pairing import (
    Pair,
    count_skipped,
    first_occurrences,
    model_of,
    resolve_name,
    unique,
)
from infersize.sweep.settings import Setting


def _gpus(cfg: SweepConfig, doc: YamlDocument, catalog: Catalog) -> list[GpuEntry]:
    """The GPUs once each: the same GPU listed twice merges its TP sizes, unless the two
    entries give it different prices (which row would be right?)."""
    out: dict[str, GpuEntry] = {}
    for i, item in enumerate(cfg.gpus):
        entry = GpuEntry(name=item) if isinstance(item, str) else item
        loc = ("gpus", i) if isinstance(item, str) else ("gpus", i, "name")
        name = resolve_name(doc, catalog.gpu, entry.name, *loc)
        if name in out and out[name].price_usd_per_hour != entry.price_usd_per_hour:
            raise SweepConfigError(
                f"{doc.where(*loc)}: {name} is listed twice with different prices"
            )
        sizes = list(TP_SIZES) if entry.tp == "auto" else entry.tp
        before = _sizes(out[name]) if name in out else []
        tps = list(dict.fromkeys([*before, *sizes]))
        out[name] = entry.model_copy(update={"name": name, "tp": tps})
    return list(out.values())


def _sizes(entry: GpuEntry) -> list[int]:
    return list(TP_SIZES) if entry.tp == "auto" else entry.tp


def _tps(gpu: GpuEntry, target: Model, skipped: dict[str, int]) -> list[int]:
    """The GPU's TP sizes that divide the target's attention heads (the rest counted)."""
    sizes = _sizes(gpu)
    tps = tensor_parallel_sizes(target.num_attention_heads, tuple(sizes))
    count_skipped(skipped, "tp sizes that do not divide the attention heads", len(sizes) - len(tps))
    return tps


def expand_settings(
    cfg: SweepConfig,
    doc: YamlDocument,
    catalog: Catalog,
    pairs: list[Pair],
    skipped: dict[str, int],
) -> tuple[Setting, ...]:
    """Every (gpu, tp, pair, precisions, KV dtype) that can run, in the tables' order."""

    def names(key: str, lookup: Callable[[str], Any], values: list[str]) -> list[str]:
        return unique(resolve_name(doc, lookup, n, key, i) for i, n in first_occurrences(values))

    tq = names("target_quants", catalog.weight_format, cfg.target_quants)
    dq = names("draft_quants", catalog.weight_format, cfg.draft_quants)
    kvs = names("kv_dtypes", catalog.kv_dtype, cfg.kv_dtypes)
    support_level = _support_levels(catalog, get_engine(cfg.engine).support_family)
    settings = set()
    for gpu, pair in product(_gpus(cfg, doc, catalog), pairs):
        tps = _tps(gpu, model_of(catalog, pair.target), skipped)
        drafter = model_of(catalog, pair.draft)
        method = method_of(drafter).name
        target_limit = model_of(catalog, pair.target).max_position_embeddings
        draft_limit = max_context_tokens(drafter)
        for t_q, d_q in product(tq, _draft_quants(drafter, dq)):
            support = support_level(gpu.name, t_q, d_q)
            if support == "unsupported":
                count_skipped(
                    skipped, "settings with a precision the GPU cannot run", len(tps) * len(kvs)
                )
                continue
            for tp, k_v in product(tps, kvs):
                setting = Setting(
                    gpu=gpu.name,
                    tp=tp,
                    target=pair.target,
                    target_quant=t_q,
                    kv_dtype=k_v,
                    draft=pair.draft,
                    draft_quant=d_q,
                    price_usd_per_hour=gpu.price_usd_per_hour,
                    target_max_context_tokens=target_limit,
                    draft_max_context_tokens=draft_limit,
                    alphas=pair.alphas,
                    alpha_source=pair.alpha_source,
                    support=support,
                    method=method,
                    profile=pair.profile,
                    acceptance_positions=pair.positions,
                    kind_alphas=pair.kind_alphas,
                )
                settings.add(setting)
    order = ("gpu", "target", "tp", "target_quant", "kv_dtype", "draft", "draft_quant")
    return tuple(sorted(settings, key=attrgetter(*order)))


def _support_levels(catalog: Catalog, family: str) -> Callable[[str, str, str], str]:
    """How a GPU runs a target and a draft precision under the engine family: the least
    supported side's level, worked out once per (GPU, target precision, draft precision)
    however many pairs share them."""

    @cache
    def level(gpu: str, target_quant: str, draft_quant: str) -> str:
        device = catalog.gpu(gpu)
        sides = {
            "target": (target_quant, catalog.support(target_quant, device, family)),
            "draft": (draft_quant, catalog.support(draft_quant, device, family)),
        }
        return combined_support(sides).level

    return level


def _draft_quants(drafter: Model, asked: list[str]) -> list[str]:
    """A draft model runs at every precision asked; a head at its checkpoint's own (engines
    load heads unquantised), n-gram lookup at none."""
    if drafter.speculator == "ngram":
        return ["none"]
    if drafter.is_speculator_head:
        return [drafter.checkpoint_dtype or "bf16"]
    return asked
