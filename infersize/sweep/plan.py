"""Grid expansion: a validated SweepConfig becomes a Plan of settings and chunks. Pure: reads the
catalog, writes nothing. Settings are (gpu, tp, target, target precision, KV dtype, draft, draft
precision); the grid axes (context, batch, α, K) are shared arrays. Chunks hold whole
(gpu, target) groups, split along context and batch only when a group is too large, so every
frontier and best-pair group is complete inside one chunk."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from infersize import __version__
from infersize.catalog.store import load_catalog
from infersize.catalog.yamlfile import YamlDocument
from infersize.core.engines import EngineSettings
from infersize.core.evaluate import MAX_K
from infersize.core.knobs import ENGINE_KNOBS
from infersize.errors import SweepConfigError
from infersize.record import record
from infersize.service.context import decode_context
from infersize.sweep.capacity.plan import capacity_plan, resolved_capacity
from infersize.sweep.config import SweepConfig, axis_values
from infersize.sweep.grid import expand_settings
from infersize.sweep.pairing import (
    int_axis,
    resolve_pairs,
)
from infersize.sweep.settings import CapacityPlan, Chunk, Scoring, Setting

# A capacity row's mean-field screen takes about as long as scoring 100,000 decode cells on one
# core (some 20 ms); the rows the simulator answers take far longer
CAPACITY_ROW_CELLS = 100_000


@record
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
    notes: tuple[str, ...] = ()  # what the user should know about the grid
    capacity: CapacityPlan | None = None  # workloads × SLAs: the capacity table

    @property
    def capacity_rows(self) -> int:
        """Rows of the capacity table: settings × workloads' target rates × SLAs × scenarios."""
        if self.capacity is None:
            return 0
        rates = sum(len(w.target_request_rates) for w in self.capacity.workloads)
        return len(self.settings) * rates * len(self.capacity.slas) * self.scenarios

    @property
    def work_cells(self) -> int:
        """The plan's work counted in decode cells, to decide whether workers pay: a capacity
        row weighs CAPACITY_ROW_CELLS."""
        return self.total_cells + self.capacity_rows * CAPACITY_ROW_CELLS

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
            for name in (
                "gpu",
                "tp",
                "target",
                "target_quant",
                "kv_dtype",
                "draft",
                "draft_quant",
                "method",
            )
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
        """Everything that determines the tables, given the catalog (no paths, no timestamps),
        compactly: each axis's values as resolved, not every setting. The settings are the
        product of these axes less what the catalog rules out (TP sizes that do not divide the
        heads, precisions a GPU cannot run), so this and the catalog's bytes fix them."""
        return self._resolved

    @cached_property
    def _resolved(self) -> dict[str, Any]:
        pairs = sorted({(s.target, s.draft, s.alphas, s.alpha_source) for s in self.settings})
        profiles = {(s.target, s.draft): list(s.profile) for s in self.settings if s.profile}
        positions = {
            (s.target, s.draft): s.acceptance_positions
            for s in self.settings
            if s.acceptance_positions is not None
        }
        gpus: dict[str, tuple[set[int], float | None]] = {}
        for s in self.settings:
            gpus.setdefault(s.gpu, (set(), s.price_usd_per_hour))[0].add(s.tp)
        return {
            "name": self.name,
            "infersize_version": __version__,
            "pairs": [
                {"target": t, "draft": d, "acceptance_rates": list(a), "acceptance_source": src}
                | ({"acceptance_profile": profiles[(t, d)]} if (t, d) in profiles else {})
                | ({"acceptance_positions": positions[(t, d)]} if (t, d) in positions else {})
                for t, d, a, src in pairs
            ],
            "gpus": [
                {"gpu": gpu, "tp": sorted(tps), "price_usd_per_hour": price}
                for gpu, (tps, price) in sorted(gpus.items())
            ],
            **{
                f"{name}s": sorted({getattr(s, name) for s in self.settings})
                for name in ("target_quant", "draft_quant", "kv_dtype")
            },
            "context_lengths": list(self.contexts),
            "batch_sizes": list(self.batches),
            "acceptance_scenarios": self.scenarios,
            "draft_k": list(self.ks),
            "scoring": asdict(self.scoring) | {"engine": self.scoring.engine.as_dict()},
            "settings": len(self.settings),
            "skipped": dict(self.skipped),
        } | ({} if self.capacity is None else {"capacity": resolved_capacity(self.capacity)})

    def config_hash(self) -> str:
        return self._config_hash

    @cached_property
    def _config_hash(self) -> str:
        text = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def catalog_hash(self) -> str:
        digest = hashlib.sha256()
        for path in load_catalog(tuple(Path(p) for p in self.scoring.catalog_files)).files:
            digest.update(Path(path).read_bytes())
        return digest.hexdigest()


def _k_axis(cfg: SweepConfig, doc: YamlDocument) -> tuple[int, ...]:
    ks = int_axis(doc, axis_values(cfg.draft_k), "draft_k", 1)
    if ks[-1] > MAX_K:
        raise SweepConfigError(f"{doc.where('draft_k')}: K must be at most {MAX_K}")
    if ks[-1] - ks[0] + 1 != len(ks):
        raise SweepConfigError(
            f"{doc.where('draft_k')}: the K range must be consecutive (got {list(ks)})"
        )
    return ks


def _contexts(cfg: SweepConfig, doc: YamlDocument) -> tuple[int, ...]:
    """context_lengths, or input + output/2 of every (input_tokens, output_tokens)."""
    if cfg.context_lengths is not None:
        return int_axis(doc, axis_values(cfg.context_lengths), "context_lengths", 1)
    assert cfg.input_tokens is not None and cfg.output_tokens is not None
    inputs = int_axis(doc, axis_values(cfg.input_tokens), "input_tokens", 1)
    outputs = int_axis(doc, axis_values(cfg.output_tokens), "output_tokens", 0)
    return tuple(sorted({decode_context(None, i, o) for i in inputs for o in outputs}))


def build_plan(cfg: SweepConfig, doc: YamlDocument, catalog_files: tuple[str, ...] = ()) -> Plan:
    catalog = load_catalog(tuple(Path(p) for p in catalog_files))
    skipped: dict[str, int] = {}
    notes: list[str] = []
    contexts = _contexts(cfg, doc)
    batches = int_axis(doc, axis_values(cfg.batch_sizes), "batch_sizes", 1)
    ks = _k_axis(cfg, doc)
    pairs = resolve_pairs(cfg, doc, catalog, skipped, notes)
    settings = expand_settings(cfg, doc, catalog, pairs, skipped)
    scoring = Scoring(
        speedup_model=cfg.speedup_model,
        engine=EngineSettings(
            cfg.engine,
            **{name: getattr(cfg, name) for name in ENGINE_KNOBS},  # same names
        ),
        memory_headroom=cfg.memory_headroom,
        catalog_files=tuple(catalog_files),
        eagle_topk=cfg.eagle_topk,
        num_draft_tokens=cfg.num_draft_tokens,
    )
    scenarios = len(pairs[0].alphas)
    plan = Plan(
        capacity=capacity_plan(cfg, doc),
        name=cfg.name,
        settings=settings,
        contexts=contexts,
        batches=batches,
        scenarios=scenarios,
        ks=ks,
        scoring=scoring,
        skipped=skipped,
        notes=tuple(notes),
    )
    return replace(plan, chunks=make_chunks(plan, cfg.chunk_cells or auto_chunk_cells(plan)))


def auto_chunk_cells(plan: Plan) -> int:
    """Cells per chunk when the sweep does not say: 1 M, and 2 M for grids over 20 M cells,
    where fewer, larger chunks spend less on what every chunk repeats (resolving its sides,
    building and writing its parts); measured by benchmarks/sweep_bench.py."""
    return 2_000_000 if plan.total_cells > 20_000_000 else 1_000_000


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
    of contexts (or of batches within one context). With capacity axes every group is a chunk of
    its own per workload and SLA, whole: its capacity rows, which the simulator spends most on,
    weigh far more than its cells, and the leaders it simulates are chosen among all of the
    group's rows under that workload and SLA; the first of them also scores the group's cells."""
    n_c, n_b = len(plan.contexts), len(plan.batches)
    if plan.capacity is not None:
        capacity = plan.capacity
        parts = [(w, s) for w in range(len(capacity.workloads)) for s in range(len(capacity.slas))]
        chunks: list[Chunk] = []
        for group in _groups(plan.settings):
            for part in parts:
                chunks.append(
                    Chunk(
                        index=len(chunks),
                        settings=group,
                        contexts=(0, n_c),
                        batches=(0, n_b),
                        decode=part == parts[0],
                        capacity=part,
                    )
                )
        return tuple(chunks)
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
    return tuple(
        Chunk(index=i, settings=block[0], contexts=block[1], batches=block[2])
        for i, block in enumerate(blocks)
    )
