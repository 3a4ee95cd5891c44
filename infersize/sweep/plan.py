"""Grid expansion: a validated SweepConfig becomes a Plan of settings and chunks. Pure: reads the
catalog, writes nothing. Settings are (gpu, tp, target, target precision, KV dtype, draft, draft
precision); the grid axes (context, batch, α, K) are shared arrays. Chunks hold whole
(gpu, target) groups, split along context and batch only when a group is too large, so every
frontier and best-pair group is complete inside one chunk."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from infersize import __version__
from infersize.catalog import Catalog, load_catalog
from infersize.errors import InfersizeError
from infersize.params import param_counts
from infersize.sources import resolve_model
from infersize.spec import MAX_K
from infersize.sweep.config import GpuEntry, SweepConfig, SweepConfigError, axis_values
from infersize.yamlfile import YamlDocument


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
    alphas: tuple[float, ...] | None = None  # a pair's own α values (None: the sweep's)


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
    memory_headroom: float = 0.0
    catalog_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    name: str
    settings: tuple[Setting, ...]
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    alphas: tuple[float, ...]
    ks: tuple[int, ...]
    scoring: Scoring
    chunks: tuple[Chunk, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)

    def setting_cells(self, setting: Setting) -> int:
        n_alpha = len(setting.alphas) if setting.alphas is not None else len(self.alphas)
        return len(self.contexts) * len(self.batches) * n_alpha * len(self.ks)

    @property
    def total_cells(self) -> int:
        return sum(self.setting_cells(s) for s in self.settings)

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


def _resolve(doc: YamlDocument, fn, name: str, *loc: int | str) -> str:
    try:
        return fn(name).id
    except InfersizeError as exc:
        raise SweepConfigError(f"{_where(doc, *loc)}: {exc}") from None


def _model_key(doc: YamlDocument, catalog: Catalog, name: str, *loc: int | str) -> str:
    """A catalog model by its id; a local folder, GGUF file or hf: id by the name given (the
    workers load it again from there)."""
    try:
        source = resolve_model(name, catalog)
    except InfersizeError as exc:
        raise SweepConfigError(f"{_where(doc, *loc)}: {exc}") from None
    return source.spec.id if source.checkpoint is None else name


def _spec(catalog: Catalog, key: str):
    return resolve_model(key, catalog).spec


def _int_axis(doc: YamlDocument, values: np.ndarray, key: str, low: int) -> tuple[int, ...]:
    if np.any(values != np.round(values)) or np.any(values < low):
        raise SweepConfigError(f"{_where(doc, key)}: values must be whole numbers >= {low}")
    if len(set(values.tolist())) != len(values):
        raise SweepConfigError(f"{_where(doc, key)}: values repeat")
    return tuple(sorted(int(v) for v in values))


def _alpha_axis(doc: YamlDocument, values: np.ndarray, *loc: int | str) -> tuple[float, ...]:
    if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise SweepConfigError(f"{_where(doc, *loc)}: acceptance rates must be in [0, 1]")
    return tuple(sorted({float(v) for v in values}))


def _pairs(
    cfg: SweepConfig, doc: YamlDocument, catalog: Catalog, skipped: dict[str, int]
) -> list[tuple[str, str, tuple[float, ...] | None]]:
    pairs: dict[tuple[str, str], tuple[float, ...] | None] = {}
    for i, pair in enumerate(cfg.pairs):
        target = _model_key(doc, catalog, pair.target, "pairs", i, "target")
        draft = _model_key(doc, catalog, pair.draft, "pairs", i, "draft")
        t_tok, d_tok = (
            _spec(catalog, target).tokenizer_family,
            _spec(catalog, draft).tokenizer_family,
        )
        if t_tok != d_tok and not cfg.allow_cross_tokenizer:
            raise SweepConfigError(
                f"{_where(doc, 'pairs', i)}: draft {draft} ({d_tok} tokenizer) does not share "
                f"{target}'s tokenizer ({t_tok}); set allow_cross_tokenizer: true to pair them"
            )
        alphas = None
        if pair.acceptance_rates is not None:
            alphas = _alpha_axis(
                doc, axis_values(pair.acceptance_rates), "pairs", i, "acceptance_rates"
            )
        pairs[(target, draft)] = alphas
    targets = [_model_key(doc, catalog, n, "targets", i) for i, n in enumerate(cfg.targets)]
    drafts = [_model_key(doc, catalog, n, "drafts", i) for i, n in enumerate(cfg.drafts)]
    for target, draft in product(targets, drafts):
        t, d = _spec(catalog, target), _spec(catalog, draft)
        if t.tokenizer_family != d.tokenizer_family and not cfg.allow_cross_tokenizer:
            skipped["pairs with another tokenizer"] = (
                skipped.get("pairs with another tokenizer", 0) + 1
            )
        elif param_counts(d).total >= param_counts(t).total:
            skipped["drafts not smaller than their target"] = (
                skipped.get("drafts not smaller than their target", 0) + 1
            )
        else:
            pairs.setdefault((target, draft), None)
    if not pairs:
        raise SweepConfigError(
            f"{doc.path}: no (target, draft) pair is left after the pairing "
            "rule (same tokenizer family, draft smaller than target)"
        )
    return [(t, d, a) for (t, d), a in pairs.items()]


def _gpus(cfg: SweepConfig, doc: YamlDocument, catalog: Catalog) -> list[GpuEntry]:
    out = []
    for i, entry in enumerate(cfg.gpus):
        entry = GpuEntry(name=entry) if isinstance(entry, str) else entry
        loc = ("gpus", i) if isinstance(cfg.gpus[i], str) else ("gpus", i, "name")
        out.append(entry.model_copy(update={"name": _resolve(doc, catalog.gpu, entry.name, *loc)}))
    return out


def build_plan(cfg: SweepConfig, doc: YamlDocument, catalog_files: tuple[str, ...] = ()) -> Plan:
    catalog = load_catalog(tuple(Path(p) for p in catalog_files))
    skipped: dict[str, int] = {}
    contexts = _int_axis(doc, axis_values(cfg.context_lengths), "context_lengths", 1)
    batches = _int_axis(doc, axis_values(cfg.batch_sizes), "batch_sizes", 1)
    ks = _int_axis(doc, axis_values(cfg.draft_k), "draft_k", 1)
    if ks[-1] > MAX_K:
        raise SweepConfigError(f"{_where(doc, 'draft_k')}: K must be at most {MAX_K}")
    if ks[-1] - ks[0] + 1 != len(ks):
        raise SweepConfigError(
            f"{_where(doc, 'draft_k')}: the K range must be consecutive (got {list(ks)})"
        )
    alphas = set(_alpha_axis(doc, axis_values(cfg.acceptance_rates), "acceptance_rates"))
    pairs = _pairs(cfg, doc, catalog, skipped)
    for _, _, own in pairs:
        alphas |= set(own or ())
    tq = [
        _resolve(doc, catalog.weight_format, n, "target_quants", i)
        for i, n in enumerate(cfg.target_quants)
    ]
    dq = [
        _resolve(doc, catalog.weight_format, n, "draft_quants", i)
        for i, n in enumerate(cfg.draft_quants)
    ]
    kvs = [_resolve(doc, catalog.kv_dtype, n, "kv_dtypes", i) for i, n in enumerate(cfg.kv_dtypes)]
    settings = set()
    for gpu, (target, draft, own), tp in (
        (g, p, tp) for g in _gpus(cfg, doc, catalog) for p in pairs for tp in g.tp
    ):
        if _spec(catalog, target).num_attention_heads % tp:
            skipped["tp sizes that do not divide the attention heads"] = (
                skipped.get("tp sizes that do not divide the attention heads", 0) + 1
            )
            continue
        price = gpu.price_usd_per_hour
        for t_q, k_v, d_q in product(tq, kvs, dq):
            settings.add(Setting(gpu.name, tp, target, t_q, k_v, draft, d_q, price, own))
    ordered = tuple(
        sorted(
            settings,
            key=lambda s: (
                s.gpu,
                s.target,
                s.tp,
                s.target_quant,
                s.kv_dtype,
                s.draft,
                s.draft_quant,
            ),
        )
    )
    scoring = Scoring(
        cfg.speedup_model,
        cfg.engine,
        cfg.gpu_memory_utilization,
        cfg.overhead_gib,
        cfg.memory_headroom,
        tuple(catalog_files),
    )
    plan = Plan(
        cfg.name, ordered, contexts, batches, tuple(sorted(alphas)), ks, scoring, skipped=skipped
    )
    return replace(plan, chunks=make_chunks(plan, cfg.chunk_cells))


def make_chunks(plan: Plan, chunk_cells: int) -> tuple[Chunk, ...]:
    """Whole (gpu, target) groups packed up to `chunk_cells`; a larger group is split into blocks
    of contexts (or of batches within one context)."""
    n_c, n_b = len(plan.contexts), len(plan.batches)
    per_cb = len(plan.alphas) * len(plan.ks)  # cells of one setting at one (context, batch)
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(plan.settings) + 1):
        s = plan.settings
        if i == len(s) or (s[i].gpu, s[i].target) != (s[start].gpu, s[start].target):
            groups.append((start, i))
            start = i
    chunks: list[Chunk] = []
    pack_start, pack_cells = None, 0

    def emit(settings, contexts=(0, n_c), batches=(0, n_b)):
        chunks.append(Chunk(len(chunks), settings, contexts, batches))

    for g_start, g_end in groups:
        g_cells = (g_end - g_start) * n_c * n_b * per_cb
        if g_cells <= chunk_cells:
            if pack_start is not None and pack_cells + g_cells > chunk_cells:
                emit((pack_start, g_start))
                pack_start, pack_cells = None, 0
            pack_start = g_start if pack_start is None else pack_start
            pack_cells += g_cells
            continue
        if pack_start is not None:
            emit((pack_start, g_start))
            pack_start, pack_cells = None, 0
        per_context = (g_end - g_start) * n_b * per_cb
        if per_context <= chunk_cells:
            step = max(1, chunk_cells // per_context)
            for c in range(0, n_c, step):
                emit((g_start, g_end), (c, min(c + step, n_c)))
        else:
            step = max(1, chunk_cells // ((g_end - g_start) * per_cb))
            for c in range(n_c):
                for b in range(0, n_b, step):
                    emit((g_start, g_end), (c, c + 1), (b, min(b + step, n_b)))
    if pack_start is not None:
        emit((pack_start, len(plan.settings)))
    return tuple(chunks)
