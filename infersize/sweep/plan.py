"""Grid expansion: a validated SweepConfig becomes a Plan of settings and chunks. Pure: reads the
catalog, writes nothing. Settings are (gpu, tp, target, target precision, KV dtype, draft, draft
precision); the grid axes (context, batch, α, K) are shared arrays. Chunks hold whole
(gpu, target) groups, split along context and batch only when a group is too large, so every
frontier and best-pair group is complete inside one chunk."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from infersize import __version__
from infersize.catalog.records import Model
from infersize.catalog.sources import resolve_model
from infersize.catalog.store import Catalog, load_catalog
from infersize.catalog.yamlfile import YamlDocument
from infersize.core.arrays import FloatArray
from infersize.core.deployment import draft_is_smaller, pairing_problem
from infersize.core.engines import get_engine
from infersize.core.evaluate import MAX_K
from infersize.errors import InfersizeError
from infersize.service.acceptance import pair_acceptance
from infersize.service.resolve import combined_support
from infersize.sweep.config import GpuEntry, SweepConfig, SweepConfigError, axis_values


@dataclass(frozen=True)
class Setting:
    gpu: str
    tp: int
    target: str
    target_quant: str
    kv_dtype: str
    draft: str
    draft_quant: str
    price_usd_per_hour: float | None
    alphas: tuple[float, ...]  # the pair's α in each acceptance scenario
    alpha_source: str  # sweep, pair, published or prior (see columns.py)
    support: str = "native"  # or weight-only: the GPU dequantises a precision (support.yaml)


@dataclass(frozen=True)
class Chunk:
    index: int
    settings: tuple[int, int]  # [start, end) into Plan.settings
    contexts: tuple[int, int]  # [start, end) into Plan.contexts
    batches: tuple[int, int]


@dataclass(frozen=True)
class Scoring:
    """How every cell of a plan is scored (shared by all its chunks)."""

    speedup_model: str = "leviathan"
    engine: str = "plain"
    gpu_memory_utilization: float | None = None
    overhead_gib: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    vllm_sampler: str | None = None
    memory_headroom: float = 0.0
    catalog_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    name: str
    settings: tuple[Setting, ...]
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    scenarios: int  # acceptance scenarios: every setting has one α in each
    ks: tuple[int, ...]
    scoring: Scoring
    chunks: tuple[Chunk, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def alphas(self) -> tuple[float, ...]:
        """Every α some setting is scored at."""
        return tuple(sorted({a for s in self.settings for a in s.alphas}))

    @property
    def total_cells(self) -> int:
        per_setting = len(self.contexts) * len(self.batches) * self.scenarios * len(self.ks)
        return len(self.settings) * per_setting

    def axis_counts(self) -> dict[str, int]:
        distinct = {
            name: len({getattr(s, name) for s in self.settings})
            for name in ("gpu", "tp", "target", "target_quant", "kv_dtype", "draft", "draft_quant")
        }
        pairs = len({(s.target, s.draft) for s in self.settings})
        return {
            "pairs": pairs,
            **distinct,
            "settings": len(self.settings),
            "context_length": len(self.contexts),
            "batch_size": len(self.batches),
            "acceptance_scenario": self.scenarios,
            "acceptance_rate": len(self.alphas),
            "draft_k": len(self.ks),
        }

    def resolved(self) -> dict[str, Any]:
        """Everything that determines the tables (no paths, no timestamps)."""
        out = asdict(self)
        out.pop("chunks")
        out["settings"] = [asdict(s) for s in self.settings]
        out["infersize_version"] = __version__
        return out

    def config_hash(self) -> str:
        text = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def catalog_hash(self) -> str:
        digest = hashlib.sha256()
        for path in load_catalog(tuple(Path(p) for p in self.scoring.catalog_files)).files:
            digest.update(Path(path).read_bytes())
        return digest.hexdigest()


def _where(doc: YamlDocument, *loc: int | str) -> str:
    line = doc.line_of(tuple(loc))
    key = ".".join(str(p) for p in loc)
    return f"{doc.path}: " + (f"line {line}: " if line else "") + f"key '{key}'"


def _resolve(doc: YamlDocument, lookup: Callable[[str], Any], name: str, *loc: int | str) -> str:
    try:
        record_id: str = lookup(name).id
    except InfersizeError as exc:
        raise SweepConfigError(f"{_where(doc, *loc)}: {exc}") from None
    return record_id


def _model_key(doc: YamlDocument, catalog: Catalog, name: str, *loc: int | str) -> str:
    """A catalog model by its id; a local folder, GGUF file or hf: id by the name given (the
    workers load it again from there)."""
    try:
        source = resolve_model(name, catalog)
    except InfersizeError as exc:
        raise SweepConfigError(f"{_where(doc, *loc)}: {exc}") from None
    return source.model.id if source.checkpoint is None else name


def _model(catalog: Catalog, key: str) -> Model:
    return resolve_model(key, catalog).model


def _int_axis(doc: YamlDocument, values: FloatArray, key: str, low: int) -> tuple[int, ...]:
    if np.any(values != np.round(values)) or np.any(values < low):
        raise SweepConfigError(f"{_where(doc, key)}: values must be whole numbers >= {low}")
    if len(set(values.tolist())) != len(values):
        raise SweepConfigError(f"{_where(doc, key)}: values repeat")
    return tuple(sorted(int(v) for v in values))


def _alpha_axis(doc: YamlDocument, values: FloatArray, *loc: int | str) -> tuple[float, ...]:
    if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise SweepConfigError(f"{_where(doc, *loc)}: acceptance rates must be in [0, 1]")
    return tuple(sorted({float(v) for v in values}))


@dataclass(frozen=True)
class Pair:
    target: str
    draft: str
    alphas: tuple[float, ...]
    alpha_source: str


def _explicit_pairs(
    cfg: SweepConfig, doc: YamlDocument, catalog: Catalog
) -> dict[tuple[str, str], tuple[float, ...] | None]:
    pairs: dict[tuple[str, str], tuple[float, ...] | None] = {}
    for i, pair in enumerate(cfg.pairs):
        target = _model_key(doc, catalog, pair.target, "pairs", i, "target")
        draft = _model_key(doc, catalog, pair.draft, "pairs", i, "draft")
        problem = pairing_problem(
            _model(catalog, target), _model(catalog, draft), cfg.allow_cross_tokenizer
        )
        if problem:
            raise SweepConfigError(
                f"{_where(doc, 'pairs', i)}: {problem}; set allow_cross_tokenizer: true to "
                "pair them"
            )
        alphas = None
        if pair.acceptance_rates is not None:
            alphas = _alpha_axis(
                doc, axis_values(pair.acceptance_rates), "pairs", i, "acceptance_rates"
            )
        pairs[(target, draft)] = alphas
    return pairs


def _paired_names(
    cfg: SweepConfig, doc: YamlDocument, catalog: Catalog, skipped: dict[str, int]
) -> dict[tuple[str, str], tuple[float, ...] | None]:
    pairs = _explicit_pairs(cfg, doc, catalog)
    targets = [_model_key(doc, catalog, n, "targets", i) for i, n in enumerate(cfg.targets)]
    drafts = [_model_key(doc, catalog, n, "drafts", i) for i, n in enumerate(cfg.drafts)]
    for target, draft in product(targets, drafts):
        t, d = _model(catalog, target), _model(catalog, draft)
        if pairing_problem(t, d, cfg.allow_cross_tokenizer):
            _count(skipped, "pairs with another tokenizer")
        elif not draft_is_smaller(t, d):
            _count(skipped, "drafts not smaller than their target")
        else:
            pairs.setdefault((target, draft), None)
    if not pairs:
        raise SweepConfigError(
            f"{doc.path}: no (target, draft) pair is left after the pairing "
            "rule (same tokenizer family, draft smaller than target)"
        )
    return pairs


def _pairs(
    cfg: SweepConfig, doc: YamlDocument, catalog: Catalog, skipped: dict[str, int]
) -> list[Pair]:
    """Every pair with its α in each scenario: its own list, else the sweep's what-if list,
    else the acceptance catalog (published figures or the prior: low, expected, high). Every
    pair must have the same number of scenarios: rows are compared scenario by scenario."""
    uniform = None
    if cfg.acceptance_rates is not None:
        uniform = _alpha_axis(doc, axis_values(cfg.acceptance_rates), "acceptance_rates")
    pairs = []
    for (target, draft), own in _paired_names(cfg, doc, catalog, skipped).items():
        if own is not None:
            pairs.append(Pair(target, draft, own, "pair"))
        elif uniform is not None:
            pairs.append(Pair(target, draft, uniform, "sweep"))
        else:
            known = pair_acceptance(_model(catalog, target), _model(catalog, draft), catalog)
            pairs.append(Pair(target, draft, known.scenarios, known.source))
    counts = {len(p.alphas) for p in pairs}
    if len(counts) > 1:
        raise SweepConfigError(
            f"{doc.path}: pairs have {' and '.join(str(n) for n in sorted(counts))} acceptance "
            "rates: every pair needs the same number of scenarios, compared position by position"
        )
    return pairs


def _count(skipped: dict[str, int], reason: str, n: int = 1) -> None:
    if n:
        skipped[reason] = skipped.get(reason, 0) + n


def _gpus(cfg: SweepConfig, doc: YamlDocument, catalog: Catalog) -> list[GpuEntry]:
    out = []
    for i, item in enumerate(cfg.gpus):
        entry = GpuEntry(name=item) if isinstance(item, str) else item
        loc = ("gpus", i) if isinstance(item, str) else ("gpus", i, "name")
        out.append(entry.model_copy(update={"name": _resolve(doc, catalog.gpu, entry.name, *loc)}))
    return out


def _k_axis(cfg: SweepConfig, doc: YamlDocument) -> tuple[int, ...]:
    ks = _int_axis(doc, axis_values(cfg.draft_k), "draft_k", 1)
    if ks[-1] > MAX_K:
        raise SweepConfigError(f"{_where(doc, 'draft_k')}: K must be at most {MAX_K}")
    if ks[-1] - ks[0] + 1 != len(ks):
        raise SweepConfigError(
            f"{_where(doc, 'draft_k')}: the K range must be consecutive (got {list(ks)})"
        )
    return ks


def _settings(
    cfg: SweepConfig,
    doc: YamlDocument,
    catalog: Catalog,
    pairs: list[Pair],
    skipped: dict[str, int],
) -> tuple[Setting, ...]:
    """Every (gpu, tp, pair, precisions, KV dtype) that can run, in the tables' order."""

    def names(key: str, lookup: Callable[[str], Any], values: list[str]) -> list[str]:
        return [_resolve(doc, lookup, n, key, i) for i, n in enumerate(values)]

    tq = names("target_quants", catalog.weight_format, cfg.target_quants)
    dq = names("draft_quants", catalog.weight_format, cfg.draft_quants)
    kvs = names("kv_dtypes", catalog.kv_dtype, cfg.kv_dtypes)
    family = get_engine(cfg.engine).support_family
    settings = set()
    for gpu, pair in product(_gpus(cfg, doc, catalog), pairs):
        device = catalog.gpu(gpu.name)
        heads = _model(catalog, pair.target).num_attention_heads
        tps = [tp for tp in gpu.tp if heads % tp == 0]
        _count(skipped, "tp sizes that do not divide the attention heads", len(gpu.tp) - len(tps))
        for t_q, d_q in product(tq, dq):
            sides = {
                "target": (t_q, catalog.support(t_q, device, family)),
                "draft": (d_q, catalog.support(d_q, device, family)),
            }
            support = combined_support(sides).level
            if support == "unsupported":
                _count(skipped, "settings with a precision the GPU cannot run", len(tps) * len(kvs))
                continue
            for tp, k_v in product(tps, kvs):
                setting = Setting(
                    gpu.name, tp, pair.target, t_q, k_v, pair.draft, d_q,
                    gpu.price_usd_per_hour, pair.alphas, pair.alpha_source, support,
                )  # fmt: skip
                settings.add(setting)
    order = ("gpu", "target", "tp", "target_quant", "kv_dtype", "draft", "draft_quant")
    return tuple(sorted(settings, key=lambda s: tuple(getattr(s, f) for f in order)))


def build_plan(cfg: SweepConfig, doc: YamlDocument, catalog_files: tuple[str, ...] = ()) -> Plan:
    catalog = load_catalog(tuple(Path(p) for p in catalog_files))
    skipped: dict[str, int] = {}
    contexts = _int_axis(doc, axis_values(cfg.context_lengths), "context_lengths", 1)
    batches = _int_axis(doc, axis_values(cfg.batch_sizes), "batch_sizes", 1)
    ks = _k_axis(cfg, doc)
    pairs = _pairs(cfg, doc, catalog, skipped)
    settings = _settings(cfg, doc, catalog, pairs, skipped)
    scoring = Scoring(
        cfg.speedup_model,
        cfg.engine,
        cfg.gpu_memory_utilization,
        cfg.overhead_gib,
        cfg.max_num_batched_tokens,
        cfg.max_num_seqs,
        cfg.vllm_sampler,
        cfg.memory_headroom,
        tuple(catalog_files),
    )
    scenarios = len(pairs[0].alphas)
    plan = Plan(cfg.name, settings, contexts, batches, scenarios, ks, scoring, skipped=skipped)
    return replace(plan, chunks=make_chunks(plan, cfg.chunk_cells))


def _groups(settings: tuple[Setting, ...]) -> list[tuple[int, int]]:
    """[start, end) of each run of settings with the same (gpu, target)."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(settings) + 1):
        if i == len(settings) or (settings[i].gpu, settings[i].target) != (
            settings[start].gpu,
            settings[start].target,
        ):
            groups.append((start, i))
            start = i
    return groups


def _split_group(
    group: tuple[int, int], n_c: int, n_b: int, per_cb: int, chunk_cells: int
) -> list[tuple[tuple[int, int], tuple[int, int], tuple[int, int]]]:
    """A (gpu, target) group too large for one chunk, as blocks of contexts (or of batches
    within one context): (settings, contexts, batches) ranges."""
    size = group[1] - group[0]
    per_context = size * n_b * per_cb
    if per_context <= chunk_cells:
        step = max(1, chunk_cells // per_context)
        return [(group, (c, min(c + step, n_c)), (0, n_b)) for c in range(0, n_c, step)]
    step = max(1, chunk_cells // (size * per_cb))
    return [
        (group, (c, c + 1), (b, min(b + step, n_b)))
        for c in range(n_c)
        for b in range(0, n_b, step)
    ]


def make_chunks(plan: Plan, chunk_cells: int) -> tuple[Chunk, ...]:
    """Whole (gpu, target) groups packed up to `chunk_cells`; a larger group is split into blocks
    of contexts (or of batches within one context)."""
    n_c, n_b = len(plan.contexts), len(plan.batches)
    per_cb = plan.scenarios * len(plan.ks)  # cells of one setting at one (context, batch)
    blocks: list[tuple[tuple[int, int], tuple[int, int], tuple[int, int]]] = []
    pack_start, pack_cells = None, 0
    for g_start, g_end in _groups(plan.settings):
        g_cells = (g_end - g_start) * n_c * n_b * per_cb
        if pack_start is not None and (g_cells > chunk_cells or pack_cells + g_cells > chunk_cells):
            blocks.append(((pack_start, g_start), (0, n_c), (0, n_b)))
            pack_start, pack_cells = None, 0
        if g_cells > chunk_cells:
            blocks.extend(_split_group((g_start, g_end), n_c, n_b, per_cb, chunk_cells))
            continue
        pack_start = g_start if pack_start is None else pack_start
        pack_cells += g_cells
    if pack_start is not None:
        blocks.append(((pack_start, len(plan.settings)), (0, n_c), (0, n_b)))
    return tuple(Chunk(i, *block) for i, block in enumerate(blocks))
