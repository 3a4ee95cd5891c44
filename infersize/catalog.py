"""The catalogs (configs/*.yaml) as frozen, validated records, and name resolution.

Catalogs are data: adding a model, GPU or precision is a YAML change. User overlays
(`--catalog FILE`) are validated by the same schema and may add entries or replace built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from infersize.errors import CatalogError, UnknownNameError
from infersize.yamlfile import read_yaml, validate


class _Record(BaseModel):
    """Catalog records are frozen and reject unknown keys, so a typo fails at load."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# Ids name output partitions (cells/gpu=<id>/) and table rows: no path separators or spaces.
CatalogId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")]


class ModelSpec(_Record):
    """Architecture of one model, with Hugging Face config.json field names."""

    id: CatalogId
    hf_repo: str
    family: str
    tokenizer_family: str
    architecture: str
    hidden_size: PositiveInt
    intermediate_size: PositiveInt
    num_hidden_layers: PositiveInt
    num_attention_heads: PositiveInt
    num_key_value_heads: PositiveInt
    head_dim: PositiveInt | None = None  # only where config.json sets it; else hidden / heads
    vocab_size: PositiveInt
    tie_word_embeddings: bool
    qkv_bias: bool = False
    o_proj_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3: RMSNorm(head_dim) on q and k in every layer
    norms_per_layer: PositiveInt = 2  # Gemma-2 has 4 (pre/post attention and MLP)
    sliding_window: PositiveInt | None = None
    sliding_window_layers: int | None = Field(default=None, ge=0)  # None: every layer
    num_experts: PositiveInt | None = None
    num_experts_per_tok: PositiveInt | None = None
    moe_intermediate_size: PositiveInt | None = None  # None: intermediate_size
    num_shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: PositiveInt | None = None  # Qwen-MoE: own size, plus a gate
    first_k_dense_replace: int = Field(default=0, ge=0)  # DeepSeek: dense MLP in the first k layers
    router_bias: bool = False  # DeepSeek-V3: e_score_correction_bias, one per routed expert
    # Multi-head latent attention (DeepSeek-V2/V3): the cache holds kv_lora_rank + qk_rope_head_dim
    q_lora_rank: PositiveInt | None = None
    kv_lora_rank: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    extra_params: int = Field(default=0, ge=0)  # loaded beside the decoder (Gemma-3 vision tower)
    max_position_embeddings: PositiveInt
    checkpoint_dtype: str | None = None
    published_params: PositiveInt | None = None
    published_active_params: PositiveInt | None = None
    published_params_source: str | None = None
    sources: list[str] = []
    notes: str | None = None
    aliases: list[str] = []

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "hidden_size must divide by num_attention_heads when head_dim is unset"
            )
        if (self.num_experts is None) != (self.num_experts_per_tok is None):
            raise ValueError("num_experts and num_experts_per_tok go together")
        if self.sliding_window_layers and self.sliding_window_layers > self.num_hidden_layers:
            raise ValueError("sliding_window_layers exceeds num_hidden_layers")
        mla = (self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim)
        if any(v is not None for v in mla) and any(v is None for v in mla):
            raise ValueError(
                "MLA needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim together"
            )
        if self.first_k_dense_replace > self.num_hidden_layers:
            raise ValueError("first_k_dense_replace exceeds num_hidden_layers")
        return self

    @property
    def head_dim_resolved(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None


class GpuSpec(_Record):
    """One accelerator. memory_bytes is what the CUDA runtime reports, not the marketing figure."""

    id: CatalogId
    name: str
    aliases: list[str] = []
    vendor: Literal["nvidia", "amd", "other"] = "nvidia"
    marketed_memory_gb: float | None = None
    nvidia_smi_total_mib: int | None = None
    memory_bytes: PositiveInt
    memory_source: str
    bandwidth_gb_per_s: float = Field(gt=0)
    fp16_tflops: float = Field(gt=0)
    bf16_tflops: float | None = Field(default=None, gt=0)
    fp8_tflops: float | None = Field(default=None, gt=0)
    int8_tops: float | None = Field(default=None, gt=0)
    fp4_tflops: float | None = Field(default=None, gt=0)
    interconnect: str | None = None
    interconnect_gb_per_s: float | None = Field(default=None, gt=0)
    price_usd_per_hour: float | None = Field(default=None, ge=0)
    price_source: str | None = None
    sources: list[str] = []

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense tensor-core peak (FLOP/s) for a compute dtype, falling back to fp16 where the
        part lacks the faster unit (fp8 weights on an A100 run as fp16 through Marlin kernels)."""
        rate = {
            "bf16": self.bf16_tflops,
            "fp8": self.fp8_tflops,
            "int8": self.int8_tops,
            "fp4": self.fp4_tflops or self.fp8_tflops,
            "fp32": None,
        }.get(compute_dtype)
        return (rate or self.fp16_tflops) * 1e12

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_gb_per_s * 1e9


class WeightFormat(_Record):
    """A weight precision: bits per weight of linear layers (scales included) and the rest."""

    id: CatalogId
    name: str
    linear_bits_per_weight: float = Field(gt=0, le=32)
    embedding_bits: float = Field(gt=0, le=32)
    lm_head_bits: float = Field(gt=0, le=32)
    norm_bits: float = Field(gt=0, le=32)
    compute_dtype: Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4"]
    exact: bool
    aliases: list[str] = []


class KvDtype(_Record):
    id: CatalogId
    bytes_per_element: float = Field(gt=0)
    aliases: list[str] = []


class _CatalogFile(_Record):
    sources: dict[str, str] = {}
    models: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    weight_formats: list[dict[str, Any]] = []
    kv_dtypes: list[dict[str, Any]] = []


_SECTIONS: dict[str, tuple[type[_Record], str]] = {
    "models": (ModelSpec, "model"),
    "gpus": (GpuSpec, "gpu"),
    "weight_formats": (WeightFormat, "precision"),
    "kv_dtypes": (KvDtype, "kv dtype"),
}


@dataclass(frozen=True)
class _Table:
    """Records of one kind by id, plus every lower-cased name (id, alias, HF repo) → id."""

    kind: str
    records: dict[str, Any] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def add(self, record: Any, origin: Path) -> None:
        if record.id in self.records:  # an overlay replaces a built-in entry with the same id
            self.names.update({k: v for k, v in self.names.items() if v != record.id})
        self.records[record.id] = record
        for name in [record.id, *getattr(record, "aliases", []), getattr(record, "hf_repo", "")]:
            if not name:
                continue
            owner = self.names.get(name.lower())
            if owner not in (None, record.id):
                raise CatalogError(
                    f"{origin}: {self.kind} '{record.id}': name '{name}' is already used by "
                    f"'{owner}'"
                )
            self.names[name.lower()] = record.id

    def get(self, name: str) -> Any:
        key = self.names.get(name.strip().lower())
        if key is None:
            known = [n for n in self.names if "/" not in n]
            hint = "" if self.kind in ("model", "gpu") else "see configs/precisions.yaml"
            raise UnknownNameError(self.kind, name, known, hint)
        return self.records[key]


@dataclass(frozen=True)
class Catalog:
    models: _Table
    gpus: _Table
    weight_formats: _Table
    kv_dtypes: _Table
    files: tuple[Path, ...]

    def model(self, name: str) -> ModelSpec:
        return self.models.get(name)

    def gpu(self, name: str) -> GpuSpec:
        return self.gpus.get(name)

    def weight_format(self, name: str) -> WeightFormat:
        return self.weight_formats.get(name)

    def kv_dtype(self, name: str) -> KvDtype:
        return self.kv_dtypes.get(name)

    def is_alias(self, table: _Table, name: str) -> bool:
        """True when `name` reached a record through an alias rather than its id."""
        return name.strip().lower() != table.names.get(name.strip().lower(), "").lower()


def builtin_config_dir() -> Path:
    """configs/ inside the installed wheel, or at the top of a source checkout."""
    packaged = Path(str(resources.files("infersize"))) / "configs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "configs"


BUILTIN_FILES = ("models.yaml", "gpus.yaml", "precisions.yaml")


def _load_file(path: Path, catalog: Catalog) -> None:
    doc = read_yaml(path)
    if not isinstance(doc.data, dict):
        raise CatalogError(f"{path}: expected a mapping with models/gpus/weight_formats/kv_dtypes")
    validate(doc, _CatalogFile, doc.data)
    tables = {
        "models": catalog.models,
        "gpus": catalog.gpus,
        "weight_formats": catalog.weight_formats,
        "kv_dtypes": catalog.kv_dtypes,
    }
    for section, (schema, _kind) in _SECTIONS.items():
        for index, entry in enumerate(doc.data.get(section) or []):
            tables[section].add(validate(doc, schema, entry, (section, index)), path)


@lru_cache(maxsize=8)
def load_catalog(overlays: tuple[Path, ...] = ()) -> Catalog:
    """Built-in catalogs, then each overlay file in order (later entries replace earlier ones)."""
    base = builtin_config_dir()
    files = tuple(base / name for name in BUILTIN_FILES) + tuple(Path(p) for p in overlays)
    catalog = Catalog(*(_Table(kind) for _schema, kind in _SECTIONS.values()), files=files)
    for path in files:
        _load_file(path, catalog)
    return catalog
