"""A chunk's values per setting, which its table rows take by their setting index: the identity
columns as text, the context limits, α, the MoE counts of the confidence rule, the cell keys'
first parts and the group codes. A chunk has thousands of settings and its frontier, best-pair
and coverage rows all read them, so they are computed once per chunk (the chunk whose tables
are being built, recognised by identity), each as an Arrow array or a numpy array."""

from __future__ import annotations

from operator import attrgetter

import numpy as np
import pyarrow as pa

from infersize.catalog.store import load_catalog
from infersize.core.arrays import FloatArray, IntArray
from infersize.record import record
from infersize.sweep.arrow_types import ARROW_TYPES
from infersize.sweep.columns import IDENTITY, SETTING_COLUMNS
from infersize.sweep.reduce import codes
from infersize.sweep.score import ChunkTask
from infersize.sweep.settings import Setting

# the identity columns of a decode table's rows, each the value of the row's setting
IDENTITY_COLUMNS = (
    *SETTING_COLUMNS,
    "gpu_name",
    "engine",
    "speedup_model",
    "support",
    "acceptance_source",
)


@record
class PerSetting:
    """One value per setting of a chunk (one per setting and scenario for `alpha_text`)."""

    # the identity columns by name (gpu, gpu_name, tp, ..., support, acceptance_source), typed
    # as the tables hold them: a table's column is `identity[name].take(row settings)`
    identity: dict[str, pa.Array]
    alphas: FloatArray  # (settings, scenarios)
    target_limit: IntArray  # the target's max_position_embeddings
    draft_limit: FloatArray  # the draft's; NaN for heads and n-gram lookup
    limit: FloatArray  # the lesser of the two: the longest context a row's models hold
    num_experts: FloatArray  # the target's experts per MoE layer (0: dense)
    experts_per_token: FloatArray
    cell_prefix: pa.Array  # gpu|tp…|target@quant|draft@quant|kv=… of the cell keys
    alpha_text: pa.Array  # a=… of the cell keys, per (setting, scenario) flattened
    outer: IntArray  # code of (gpu, target), sorting like it
    frontier_inner: IntArray  # code of (gpu, target, tp, target precision, KV dtype)


def _text(values: list[object]) -> pa.Array:
    return pa.array([str(v) for v in values], ARROW_TYPES["str"])


def _identity(task: ChunkTask) -> dict[str, pa.Array]:
    settings = task.settings
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    names = (*SETTING_COLUMNS, "support", "alpha_source")
    columns = dict(zip(names, zip(*map(attrgetter(*names), settings), strict=True), strict=True))
    out = {}
    for name in SETTING_COLUMNS:
        values = list(columns[name])
        if IDENTITY[name].kind == "int":
            out[name] = pa.array(np.asarray(values, dtype=np.int64))
        else:
            out[name] = _text(values)
    gpu_names = {gpu: catalog.gpu(gpu).name for gpu in set(columns["gpu"])}
    return {
        **out,
        "gpu_name": _text([gpu_names[gpu] for gpu in columns["gpu"]]),
        "engine": _text([task.scoring.engine.engine] * len(settings)),
        "speedup_model": _text([task.scoring.speedup_model] * len(settings)),
        "support": _text(list(columns["support"])),
        "acceptance_source": _text(list(columns["alpha_source"])),
    }


def _alpha_text(settings: tuple[Setting, ...]) -> pa.Array:
    """a=… for each setting's α in each scenario, each pair's α (one tuple its settings
    share) formatted once."""
    words: dict[int, list[str]] = {}
    for x in settings:
        if id(x.alphas) not in words:
            words[id(x.alphas)] = [f"a={a:g}" for a in x.alphas]
    return pa.array([word for x in settings for word in words[id(x.alphas)]], pa.string())


def _compute(task: ChunkTask) -> PerSetting:
    settings = task.settings
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    targets = {name: catalog.model(name) for name in {x.target for x in settings}}
    models = [targets[x.target] for x in settings]
    target_limit = np.asarray([x.target_max_context_tokens for x in settings], dtype=np.int64)
    draft = [x.draft_max_context_tokens for x in settings]
    draft_limit = np.asarray([np.nan if d is None else d for d in draft], dtype=np.float64)
    prefixes = [
        f"{x.gpu}|tp{x.tp}|{x.target}@{x.target_quant}|{x.draft}@{x.draft_quant}|kv={x.kv_dtype}"
        for x in settings
    ]
    return PerSetting(
        identity=_identity(task),
        alphas=np.asarray([x.alphas for x in settings], dtype=np.float64),
        target_limit=target_limit,
        draft_limit=draft_limit,
        limit=np.fmin(target_limit.astype(np.float64), draft_limit),
        num_experts=np.asarray([m.num_experts or 0 for m in models], dtype=np.float64),
        experts_per_token=np.asarray([m.num_experts_per_tok or 0 for m in models], np.float64),
        cell_prefix=pa.array(prefixes, pa.string()),
        alpha_text=_alpha_text(settings),
        outer=codes([(x.gpu, x.target) for x in settings]),
        frontier_inner=codes(
            [(x.gpu, x.target, x.tp, x.target_quant, x.kv_dtype) for x in settings]
        ),
    )


# the chunk whose tables are being built and its values: each table asks in turn
_LAST: dict[str, tuple[ChunkTask, PerSetting]] = {}


def per_setting(task: ChunkTask) -> PerSetting:
    """The chunk's values per setting, computed on the first of its tables to ask."""
    last = _LAST.get("chunk")
    if last is not None and last[0] is task:
        return last[1]
    values = _compute(task)
    _LAST["chunk"] = (task, values)
    return values
