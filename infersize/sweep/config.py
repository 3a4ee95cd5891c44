"""Sweep YAML schema (strict: unknown keys are errors naming the file, line and key).

Axes are lists or ranges. A range is inclusive: {start: 0.5, stop: 0.9, step: 0.1} or, for
sizes, {start: 1, stop: 256, factor: 2}. Field names avoid pydantic's `model_` prefix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from infersize.bounds import BEST_TOP_N, EAGLE_TOPK, PRICE_USD_PER_HOUR, TREE_TOKENS
from infersize.catalog.yamlfile import YamlDocument, read_yaml, validate
from infersize.core.arrays import FloatArray
from infersize.core.engines import ENGINES
from infersize.core.knobs import ENGINE_KNOBS, Knob
from infersize.core.methods import METHODS
from infersize.core.profile import profile_problem
from infersize.core.speedup import SPEEDUP_MODELS
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, SweepConfigError
from infersize.sweep.capacity.schema import (
    CapacityOptions,
    SlaText,
    WorkloadEntry,
    check_requests_per_run,
    check_slas,
    check_target_rates,
    check_workloads,
    known_workload_kind,
)


class _Strict(BaseModel):
    """Unknown keys are errors; so are booleans where numbers belong (YAML reads `yes` as true)
    and NaN or infinite numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Range(_Strict):
    """Inclusive range: arithmetic with `step` or geometric with `factor`."""

    start: float
    stop: float
    step: float | None = Field(default=None, gt=0)
    factor: float | None = Field(default=None, gt=1)

    @model_validator(mode="after")
    def _one_rule(self) -> Range:
        if (self.step is None) == (self.factor is None):
            raise ValueError("a range needs exactly one of step or factor")
        if self.stop < self.start:
            raise ValueError("range stop is below its start")
        if self.factor is not None and self.start <= 0:
            raise ValueError("a geometric range needs start > 0")
        if self.count() > MAX_RANGE_VALUES:
            raise ValueError(f"range has more than {MAX_RANGE_VALUES:,} values")
        return self

    def count(self) -> float:
        """How many values the range holds, counted before any is made (inf when absurd)."""
        if self.step is not None:
            n = (self.stop - self.start) / self.step
        else:
            n = math.log(self.stop / self.start) / math.log(float(self.factor or 2.0))
        return math.floor(n + 1e-9) + 1 if math.isfinite(n) else math.inf

    def values(self) -> FloatArray:
        n = int(self.count())
        if self.step is not None:
            return np.round(self.start + self.step * np.arange(n), 10)
        factor = float(self.factor or 2.0)  # the validator ensures one of step and factor
        return np.round(self.start * factor ** np.arange(n), 10)


MAX_RANGE_VALUES = 100_000
FloatAxis = Annotated[list[float], Field(min_length=1)] | Range
IntAxis = Annotated[list[int], Field(min_length=1)] | Range


# the largest count an axis may hold (context, batch, TP): int32's, so that tables' 64-bit
# integers and the products of two counts never overflow
MAX_AXIS_INT = 2**31 - 1


class GpuEntry(_Strict):
    name: str
    # tensor-parallel sizes, or auto: those of one node (1, 2, 4, 8) that divide each target's
    # attention heads
    tp: list[int] | Literal["auto"] = Field(default=[1], min_length=1)
    price_usd_per_hour: float | None = PRICE_USD_PER_HOUR.schema_field(None)

    @field_validator("tp")
    @classmethod
    def _tp_positive(cls, tp: list[int] | str) -> list[int] | str:
        if isinstance(tp, str):
            return tp
        if any(t < 1 for t in tp):
            raise ValueError("tp sizes must be >= 1")
        if any(t > MAX_AXIS_INT for t in tp):
            raise ValueError(f"tp sizes must be at most {MAX_AXIS_INT:,}")
        return tp


class PairEntry(_Strict):
    target: str
    draft: str
    acceptance_rates: FloatAxis | None = None
    # per-position acceptance as vLLM logs it (r_1, r_2, ...): replaces the i.i.d. α for the pair
    acceptance_profile: list[float] | None = None

    @model_validator(mode="after")
    def _one_kind_of_acceptance(self) -> PairEntry:
        if self.acceptance_rates is not None and self.acceptance_profile is not None:
            raise ValueError("give acceptance_rates or acceptance_profile, not both")
        if self.acceptance_profile is not None:
            problem = profile_problem(self.acceptance_profile)
            if problem:
                raise ValueError(f"acceptance_profile: {problem}")
        return self


class OutputConfig(_Strict):
    dir: str | None = None
    cells: bool = False  # the per-cell table (every K); large
    formats: list[Literal["parquet", "csv"]] = Field(
        default=list(DEFAULTS.output_formats), min_length=1
    )
    best_top_n: int = BEST_TOP_N.schema_field(DEFAULTS.best_top_n)


def _checked(knob: Knob) -> Callable[[Any], Any]:
    """A value of `knob`, checked by its declaration (the message is the command line's)."""

    def check(value: Any) -> Any:
        if value is not None:
            try:
                knob.check(value)
            except InfersizeError as exc:
                raise ValueError(str(exc).removeprefix(f"{knob.name} ")) from None
        return value

    return check


class _SweepFile(_Strict):
    # names the default output folder outputs/<name>: one plain folder name, never a path
    name: str = Field(default="sweep", pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$")
    targets: list[str] = []
    drafts: list[str] = []
    pairs: list[PairEntry] = []
    # speculative methods to compare (core/methods.py): pairs of other methods are dropped and
    # each target gains the catalog's published head of every head method (and n-gram lookup)
    methods: list[str] | None = None
    target_quants: list[str] = Field(default=[DEFAULTS.sweep_quant], min_length=1)
    draft_quants: list[str] = Field(default=[DEFAULTS.sweep_quant], min_length=1)
    kv_dtypes: list[str] = Field(default=[DEFAULTS.kv_dtype], min_length=1)
    gpus: list[str | GpuEntry] = Field(min_length=1)
    # tokens in each sequence's KV cache at decode; or, instead, prompt and answer lengths whose
    # every combination gives a context of input + output/2 (service/context.py)
    context_lengths: IntAxis | None = None
    input_tokens: IntAxis | None = None
    output_tokens: IntAxis | None = None
    batch_sizes: IntAxis = [DEFAULTS.batch_size]
    acceptance_rates: FloatAxis | None = None  # a what-if: the same α for every pair
    # the traffic's kind (chat, code, ...): whose published acceptance each pair takes
    # (n-gram lookup needs it); a capacity workload's own `kind` overrides it for its rows
    workload_kind: str | None = None
    draft_k: IntAxis = Range(start=1, stop=DEFAULTS.sweep_draft_k_stop, step=1)
    speedup_model: str = DEFAULTS.speedup_model  # a key of the speedup-model registry
    engine: str = DEFAULTS.engine  # a key of the engine registry
    # a draft tree (sglang, trtllm): candidates per node and the tokens verified, root included;
    # draft_k is then the tree's depth
    eagle_topk: int = EAGLE_TOPK.schema_field(DEFAULTS.eagle_topk)
    num_draft_tokens: int | None = TREE_TOKENS.schema_field(None)
    memory_headroom: float = Field(default=DEFAULTS.memory_headroom, ge=0, lt=1)
    allow_cross_tokenizer: bool = False
    max_cells: int = Field(default=100_000_000, ge=1)
    chunk_cells: int | None = Field(default=None, ge=1_000)  # None: from the grid (plan.py)
    catalog: list[str] = []
    output: OutputConfig = OutputConfig()
    # capacity axes (sweep/capacity/schema.py): with workloads and slas the sweep also writes
    # the capacity table
    workloads: list[WorkloadEntry] | None = None
    slas: dict[str, SlaText] | None = Field(default=None, validate_default=True)
    target_request_rates: list[float] | None = Field(default=None, validate_default=True)
    capacity: CapacityOptions = CapacityOptions()

    @field_validator("workload_kind")
    @classmethod
    def _known_kind(cls, kind: str | None) -> str | None:
        return None if kind is None else known_workload_kind(kind)

    @field_validator("workloads")
    @classmethod
    def _distinct_workloads(
        cls, workloads: list[WorkloadEntry] | None
    ) -> list[WorkloadEntry] | None:
        return check_workloads(workloads)

    @field_validator("slas")
    @classmethod
    def _known_slas(
        cls, slas: dict[str, str] | None, info: ValidationInfo
    ) -> dict[str, str] | None:
        if "workloads" not in info.data:  # the workloads are wrong: that error is enough
            return slas
        return check_slas(slas, info.data["workloads"])

    @field_validator("capacity")
    @classmethod
    def _enough_requests(cls, capacity: CapacityOptions, info: ValidationInfo) -> CapacityOptions:
        return check_requests_per_run(capacity, info.data.get("slas"))

    @field_validator("target_request_rates")
    @classmethod
    def _target_rates(cls, rates: list[float] | None, info: ValidationInfo) -> list[float] | None:
        return check_target_rates(rates, info.data.get("workloads"))

    @field_validator("speedup_model")
    @classmethod
    def _known_speedup_model(cls, name: str) -> str:
        return _registered(name, SPEEDUP_MODELS, "speedup model")

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, names: list[str] | None) -> list[str] | None:
        if names is None:
            return None
        if not names:
            raise ValueError("methods needs at least one method")
        return list(dict.fromkeys(_registered(n, METHODS, "method") for n in names))

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, name: str) -> str:
        return _registered(name, ENGINES, "engine")

    @model_validator(mode="after")
    def _settings_of_the_engine(self) -> _SweepFile:
        """SGLang's and TensorRT-LLM's settings only for their engines; a tree only where the
        engine drafts one, with its verified tokens."""
        rule = ENGINES[self.engine].memory_rule
        for knob in ENGINE_KNOBS.values():
            given = getattr(self, knob.name) is not None
            if knob.strict_owner and given and not knob.applies_to(rule):
                raise ValueError(
                    f"{knob.name} is a setting of {knob.owner_text}: it does not apply to engine "
                    f"{self.engine}"
                )
        if self.eagle_topk == 1:
            if self.num_draft_tokens is not None:
                raise ValueError(
                    "num_draft_tokens is for a tree (eagle_topk above 1): a chain "
                    "verifies draft_k + 1 tokens"
                )
            return self
        if not ENGINES[self.engine].drafts_trees:
            raise ValueError(
                f"eagle_topk above 1 drafts a tree, which engine {self.engine} "
                "does not: SGLang (sglang) and TensorRT-LLM (trtllm) do"
            )
        if self.num_draft_tokens is None:
            raise ValueError(
                "a tree (eagle_topk above 1) needs num_draft_tokens: the tokens the "
                "target verifies per sequence, the root included"
            )
        if not SPEEDUP_MODELS[self.speedup_model].reads_expected_tokens:
            raise ValueError(
                f"a tree (eagle_topk above 1) cannot be priced by speedup model "
                f"{self.speedup_model}, which takes one α"
            )
        return self

    @model_validator(mode="after")
    def _one_context_axis(self) -> _SweepFile:
        lengths = (self.input_tokens is not None, self.output_tokens is not None)
        if self.context_lengths is not None and any(lengths):
            raise ValueError("give context_lengths or input_tokens with output_tokens, not both")
        if lengths[0] != lengths[1]:
            raise ValueError(
                "input_tokens and output_tokens go together (the context is input + output/2)"
            )
        if self.context_lengths is None and not any(lengths):
            raise ValueError("give context_lengths, or input_tokens with output_tokens")
        return self

    @model_validator(mode="after")
    def _pairs_or_lists(self) -> _SweepFile:
        heads_only = self.methods is not None and any(m != "draft" for m in self.methods)
        if not self.pairs and not (self.targets and (self.drafts or heads_only)):
            raise ValueError("give targets and drafts (or head methods), or explicit pairs")
        return self


# The sweep file's schema: its own keys, and each engine setting as a key, one per declaration
# (core/knobs.py), of its type, with its check
if TYPE_CHECKING:
    SweepConfig = _SweepFile
else:
    SweepConfig = create_model(
        "SweepConfig",
        __base__=_SweepFile,
        **{
            knob.name: (
                Annotated[knob.kind | None, AfterValidator(_checked(knob))],
                knob.default,
            )
            for knob in ENGINE_KNOBS.values()
        },
    )


def _registered(name: str, registry: Mapping[str, object], kind: str) -> str:
    key = name.strip().lower()
    if key not in registry:
        raise ValueError(f"unknown {kind} '{name}': choose {', '.join(registry)}")
    return key


def axis_values(axis: FloatAxis | IntAxis) -> FloatArray:
    return axis.values() if isinstance(axis, Range) else np.asarray(axis, dtype=np.float64)


def load_sweep(path: Path) -> tuple[SweepConfig, YamlDocument]:
    doc = read_yaml(path, SweepConfigError)
    if not isinstance(doc.data, dict):
        raise SweepConfigError(f"{path}: expected a mapping of sweep keys at the top level")
    return validate(doc, SweepConfig, doc.data, error=SweepConfigError), doc
