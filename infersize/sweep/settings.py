"""What a chunk is scored with: its settings (one deployment each), its place in the grid and
how the whole plan is scored. Kept apart from the planner (sweep/plan.py) so that workers,
which receive these in every task, import neither the YAML schema nor Pydantic."""

from __future__ import annotations

from dataclasses import field

from infersize.core.engines import EngineSettings
from infersize.defaults import DEFAULTS
from infersize.record import record


@record
class Setting:
    gpu: str
    tp: int
    target: str
    target_quant: str
    kv_dtype: str
    draft: str
    draft_quant: str
    price_usd_per_hour: float | None
    target_max_context_tokens: int  # the target's max_position_embeddings
    draft_max_context_tokens: int | None  # the draft's; None: a head's positions are the target's
    alphas: tuple[float, ...]  # the pair's α in each acceptance scenario
    alpha_source: str  # sweep, pair, published or prior (see columns.py)
    support: str = "native"  # or weight-only: the GPU dequantises a precision (support.yaml)
    method: str = "draft"  # the speculative method the draft runs (core/methods.py)
    profile: tuple[float, ...] | None = None  # per-position acceptance replacing the i.i.d. α
    # a head's published figure: positions past its measured K are not credited
    acceptance_positions: int | None = None
    # α on each capacity workload's kind of traffic where it differs from `alphas`
    kind_alphas: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def alpha_on(self, kind: str | None, scenario: int) -> float:
        """The pair's α in `scenario` on `kind` of traffic."""
        return dict(self.kind_alphas).get(kind or "", self.alphas)[scenario]


@record
class Chunk:
    index: int
    settings: tuple[int, int]  # [start, end) into Plan.settings
    contexts: tuple[int, int]  # [start, end) into Plan.contexts
    batches: tuple[int, int]
    decode: bool = True  # scores its decode cells (a capacity sweep's group does so once)
    capacity: tuple[int, int] | None = None  # (workload, SLA) whose capacity rows it answers


@record
class Scoring:
    """How every cell of a plan is scored (shared by all its chunks)."""

    speedup_model: str = DEFAULTS.speedup_model
    engine: EngineSettings = field(default_factory=EngineSettings)
    memory_headroom: float = DEFAULTS.memory_headroom
    catalog_files: tuple[str, ...] = ()
    eagle_topk: int = DEFAULTS.eagle_topk  # 1: chains of K; more: trees of depth K
    num_draft_tokens: int | None = None  # a tree's verified tokens, the root included


@record
class Workload:
    """A named workload of a capacity sweep, resolved: its lengths (a trace read at planning,
    replayed in order) and the target rates its rows are sized for."""

    name: str
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    lengths_file: str | None  # the trace's path as the sweep file gives it
    arrival: str
    target_request_rates: tuple[float, ...]
    kind: str | None = None  # the traffic's kind: whose published acceptance its rows take

    @property
    def longest_request_tokens(self) -> int:
        """Prompt plus answer of its longest request: what a model's positions must hold."""
        return max(i + o for i, o in zip(self.input_tokens, self.output_tokens, strict=True))


@record
class CapacityPlan:
    """The capacity axes of a sweep: workloads × SLAs, and how the table is computed."""

    workloads: tuple[Workload, ...]
    slas: tuple[tuple[str, str], ...]  # (name, SLA string), in the file's order
    requests: int
    seed: int
    simulate_top: int
    headroom: float
    replications: int
    simulate_all: bool = False  # the simulator answers every row, not only where it counts
