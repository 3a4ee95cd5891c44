"""Catalog records: frozen dataclasses (infersize/record.py), units in the field names. They
are plain dataclasses, so a cached catalog loads without importing Pydantic; the same
declarations are validated by Pydantic whenever records are read from files (validation.py): a
field's constraints are `Check` markers in its annotation, rules across fields `check()`.

`Model` keeps config.json's field names (a config maps onto it key for key); its optional MoE
and MLA fields are read through the typed views `moe` and `mla`, None for models without them."""

from __future__ import annotations

from dataclasses import asdict, field, fields
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal

from infersize.record import record


class Check:
    """A field's constraint, in Pydantic's words (gt, ge, le, pattern, min_length, alias):
    applied when records are validated (catalog/validation.py), inert otherwise."""

    def __init__(self, **rules: Any) -> None:
        self.rules = rules

    def __repr__(self) -> str:
        return f"Check({', '.join(f'{k}={v!r}' for k, v in self.rules.items())})"


@record
class Record:
    """Catalog records are frozen; read from a file they reject unknown keys, so a typo fails
    at load; booleans, NaN and infinities are not numbers; and no text carries control
    characters (a terminal escape in a model's name would reach the user's terminal)."""

    strict: ClassVar[bool] = True  # validation: no str -> int, no int -> bool coercion

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Rules across fields: raise ValueError with the reason."""

    def as_dict(self, exclude_none: bool = False) -> dict[str, Any]:
        """The fields in declaration order, nested records as dicts (for JSON output)."""
        if not exclude_none:
            return asdict(self)
        return asdict(self, dict_factory=lambda items: {k: v for k, v in items if v is not None})


PositiveInt = Annotated[int, Check(gt=0)]
NonNegativeInt = Annotated[int, Check(ge=0)]
PositiveFloat = Annotated[float, Check(gt=0)]
Fraction = Annotated[float, Check(ge=0, le=1)]
Bits = Annotated[float, Check(gt=0, le=32)]
# Ids name output partitions (cells/gpu=<id>/) and table rows: no path separators or spaces.
CatalogId = Annotated[str, Check(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")]


@record
class Moe:
    """Mixture-of-experts layers (Mixtral, Qwen-MoE, DeepSeek)."""

    num_experts: int  # routed experts per MoE layer
    num_experts_per_tok: int
    expert_intermediate_size: int
    num_shared_experts: int  # DeepSeek: always-on experts of the routed size
    shared_expert_intermediate_size: int | None  # Qwen-MoE: one shared expert of its own size
    first_k_dense_replace: int  # DeepSeek: the first k layers keep a dense MLP
    layer_step: int  # Llama-4: every step-th layer is MoE (1: every layer after the first k)
    router_bias: bool  # DeepSeek-V3: one score-correction bias per routed expert
    expert_bias: bool  # gpt-oss: biases on every expert's projections


@record
class LinearAttention:
    """Gated DeltaNet layers (Qwen3-Next): no per-token KV cache, a fixed state per sequence."""

    layers: int
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel_dim: int


@record
class Mla:
    """Multi-head latent attention (DeepSeek-V2 §2.1): the cache holds one latent per token."""

    q_lora_rank: int | None  # None: q projected directly from the hidden state
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


SsmStateDtype = Literal["float32", "bfloat16", "float16"]  # SGLang's names for them
SpeculatorKind = Literal["eagle", "eagle3", "mtp", "medusa", "mlp_speculator", "ngram"]


@record
class VisionTower(Record):
    """The image encoder a multimodal checkpoint loads beside the decoder (its weights are in
    the model's extra_params). vLLM profiles it on as many largest-size items as fit in
    max(max_num_batched_tokens, tokens_per_item) tokens."""

    hidden_size: PositiveInt
    intermediate_size: PositiveInt
    patches_per_item: PositiveInt  # encoder positions of the largest image (all tiles)
    tokens_per_item: PositiveInt  # decoder tokens that image takes in the prompt
    source: str


@record
class Model(Record):
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
    sliding_window_layers: NonNegativeInt | None = None  # None: every layer
    # Llama-4: these layers attend within chunks of attention_chunk_size tokens; vLLM caches
    # them at full length by default (chunked local attention turns its hybrid allocator off)
    attention_chunk_size: PositiveInt | None = None
    chunked_attention_layers: NonNegativeInt | None = None
    num_experts: PositiveInt | None = None
    num_experts_per_tok: PositiveInt | None = None
    moe_intermediate_size: PositiveInt | None = None  # None: intermediate_size
    num_shared_experts: NonNegativeInt = 0
    shared_expert_intermediate_size: PositiveInt | None = None
    first_k_dense_replace: NonNegativeInt = 0
    moe_layer_step: PositiveInt = 1  # Llama-4 Maverick: every 2nd layer MoE, the others dense
    router_bias: bool = False
    expert_bias: bool = False  # gpt-oss: each expert's gate_up and down projections biased
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head and layer
    q_lora_rank: PositiveInt | None = None
    kv_lora_rank: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    index_n_heads: PositiveInt | None = None  # DeepSeek-V3.2's lightning indexer: heads
    index_head_dim: PositiveInt | None = None  # and their width
    # Qwen3-Next: Gated DeltaNet (linear attention) layers, named as in its config.json
    linear_attention_layers: NonNegativeInt = 0
    linear_num_key_heads: PositiveInt | None = None
    linear_num_value_heads: PositiveInt | None = None
    linear_key_head_dim: PositiveInt | None = None
    linear_value_head_dim: PositiveInt | None = None
    linear_conv_kernel_dim: PositiveInt | None = None
    # the dtype its config names for those layers' recurrent state (None: not named); SGLang
    # from 0.5.9 holds the state in it unless --mamba-ssm-dtype says otherwise
    mamba_ssm_dtype: SsmStateDtype | None = None
    attention_output_gate: bool = False  # Qwen3-Next: q_proj also emits a gate per channel
    extra_params: NonNegativeInt = 0  # loaded beside the decoder (Gemma-3 vision tower)
    # Multi-token-prediction layers the checkpoint ships after the decoder (GLM-4.5's
    # num_nextn_predict_layers): counted in its total, loaded by vLLM only as an MTP draft.
    mtp_layers: NonNegativeInt = 0
    mtp_embeddings: bool = False  # each MTP layer has its own embedding and output head copies
    vision: VisionTower | None = None  # the full multimodal checkpoint; None: text only
    # Speculator heads (EAGLE, MTP) reuse the target's token embedding and output head in vLLM
    # (v1/spec_decode/llm_base_proposer.py _maybe_share_embeddings, _maybe_share_lm_head), and
    # EAGLE-1's single layer has no final norm.
    embedding_from_target: bool = False
    lm_head_from_target: bool = False
    final_norm: bool = True
    # the speculator's kind (None: a model of its own, a draft); core/heads.py counts its parts
    speculator: SpeculatorKind | None = None
    speculator_for: list[str] = field(
        default_factory=list
    )  # catalog ids of the targets it was trained on
    draft_vocab_size: PositiveInt | None = None  # EAGLE-3: its own reduced output vocabulary
    speculator_heads: PositiveInt | None = None  # Medusa heads, MLP-speculator stages: most K
    # the checkpoint stores its own copy of the target's embedding and LM head, which vLLM
    # drops at load and shares (MTP modules of DeepSeek-V3 and GLM-4.5)
    checkpoint_copies_embedding: bool = False
    max_position_embeddings: PositiveInt
    checkpoint_dtype: str | None = None
    published_params: PositiveInt | None = None
    published_active_params: PositiveInt | None = None
    published_params_source: str | None = None
    sources: list[str] = field(default_factory=list)
    notes: str | None = None
    aliases: list[str] = field(default_factory=list)

    def check(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "hidden_size must divide by num_attention_heads when head_dim is unset"
            )
        if (self.num_experts is None) != (self.num_experts_per_tok is None):
            raise ValueError("num_experts and num_experts_per_tok go together")
        if self.num_experts is not None and (self.num_experts_per_tok or 0) > self.num_experts:
            raise ValueError("num_experts_per_tok exceeds num_experts")
        if self.sliding_window_layers and self.sliding_window_layers > self.num_hidden_layers:
            raise ValueError("sliding_window_layers exceeds num_hidden_layers")
        mla = (self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim)
        dsa = (self.index_n_heads, self.index_head_dim)  # DeepSeek-V3.2: on MLA with q_lora_rank
        if mla.count(None) % 4 or (dsa != (None, None) and None in (*mla, *dsa, self.q_lora_rank)):
            raise ValueError("MLA needs kv_lora_rank, qk_*_head_dim, v_head_dim; index_* need all")
        if self.first_k_dense_replace > self.num_hidden_layers:
            raise ValueError("first_k_dense_replace exceeds num_hidden_layers")
        if self.speculator in ("medusa", "mlp_speculator") and self.speculator_heads is None:
            raise ValueError(f"a {self.speculator} needs speculator_heads")
        if self.speculator == "eagle3" and self.draft_vocab_size is None:
            raise ValueError("an eagle3 head needs draft_vocab_size")
        if self.moe_layer_step > 1 and (self.num_experts is None or self.first_k_dense_replace):
            raise ValueError("moe_layer_step needs experts and no first_k_dense_replace")
        if (self.attention_chunk_size is None) != (self.chunked_attention_layers is None):
            raise ValueError("attention_chunk_size and chunked_attention_layers go together")
        if (self.chunked_attention_layers or 0) > self.num_hidden_layers:
            raise ValueError("chunked_attention_layers exceeds num_hidden_layers")
        if self.linear_attention_layers and self.linear_attention is None:
            raise ValueError("linear_attention_layers needs the five linear_* head fields")
        windowed = (self.sliding_window_layers or 0) + (self.chunked_attention_layers or 0)
        if self.linear_attention_layers + windowed > self.num_hidden_layers:
            raise ValueError("linear, sliding and chunked layers exceed num_hidden_layers")
        if self.mtp_embeddings and not self.mtp_layers:
            raise ValueError("mtp_embeddings needs mtp_layers")
        if self.mamba_ssm_dtype is not None and not self.linear_attention_layers:
            raise ValueError("mamba_ssm_dtype needs linear_attention_layers")

    @property
    def is_speculator_head(self) -> bool:
        """Heads (EAGLE, MTP, Medusa, MLP speculator) and n-gram lookup: they draft for a
        target, they are not models of their own."""
        return self.speculator is not None or self.embedding_from_target

    @property
    def head_dim_resolved(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @cached_property
    def moe(self) -> Moe | None:
        if self.num_experts is None or self.num_experts_per_tok is None:
            return None
        return Moe(
            num_experts=self.num_experts,
            num_experts_per_tok=self.num_experts_per_tok,
            expert_intermediate_size=self.moe_intermediate_size or self.intermediate_size,
            num_shared_experts=self.num_shared_experts,
            shared_expert_intermediate_size=self.shared_expert_intermediate_size,
            first_k_dense_replace=self.first_k_dense_replace,
            layer_step=self.moe_layer_step,
            router_bias=self.router_bias,
            expert_bias=self.expert_bias,
        )

    @cached_property
    def linear_attention(self) -> LinearAttention | None:
        # LinearAttention's fields after `layers` are the model's linear_* fields
        dims = {f.name: getattr(self, f"linear_{f.name}") for f in fields(LinearAttention)[1:]}
        layers = self.linear_attention_layers
        if not layers or None in dims.values():
            return None
        return LinearAttention(layers=layers, **{k: int(d or 0) for k, d in dims.items()})

    @cached_property
    def mla(self) -> Mla | None:
        # Mla's fields after q_lora_rank are the model's own, all set or none
        dims = {f.name: getattr(self, f.name) for f in fields(Mla)[1:]}
        if None in dims.values():
            return None
        return Mla(q_lora_rank=self.q_lora_rank, **{k: int(d) for k, d in dims.items()})


ComputeDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4"]

CudaArch = Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell", "blackwell-ws"]
RocmArch = Literal["cdna2", "cdna3", "cdna4"]
Architecture = Literal[CudaArch, RocmArch]  # one flat Literal: typing merges nested ones
SupportLevel = Literal["native", "weight-only", "unsupported"]


@record
class Gpu(Record):
    """One accelerator. memory_bytes is what the CUDA runtime reports, not the marketing figure."""

    id: CatalogId
    name: str
    aliases: list[str] = field(default_factory=list)
    vendor: Literal["nvidia", "amd", "other"] = "nvidia"
    architecture: Architecture | None = None  # what decides kernel support (support.yaml)
    marketed_memory_gb: float | None = None
    nvidia_smi_total_mib: int | None = None
    memory_bytes: PositiveInt
    memory_source: str
    bandwidth_gb_per_s: PositiveFloat
    fp16_tflops: PositiveFloat
    bf16_tflops: PositiveFloat | None = None
    fp8_tflops: PositiveFloat | None = None
    int8_tops: PositiveFloat | None = None
    fp4_tflops: PositiveFloat | None = None
    interconnect: str | None = None
    interconnect_gb_per_s: PositiveFloat | None = None
    allreduce_bus_gb_per_s: PositiveFloat | None = None  # measured busbw (None: line rate)
    price_usd_per_hour: Annotated[float, Check(ge=0)] | None = None
    price_source: str | None = None
    sources: list[str] = field(default_factory=list)

    def peak_flops(self, compute_dtype: ComputeDtype) -> float:
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


@record
class WeightFormat(Record):
    """A weight precision: bits per weight of linear layers (scales included) and the rest."""

    id: CatalogId
    name: str
    linear_bits_per_weight: Bits
    embedding_bits: Bits
    lm_head_bits: Bits
    norm_bits: Bits
    compute_dtype: ComputeDtype
    exact: bool
    aliases: list[str] = field(default_factory=list)
    engine_families: list[str] = field(default_factory=list)  # whose checkpoints hold it (all)


@record
class KvDtype(Record):
    id: CatalogId
    bytes_per_element: PositiveFloat
    aliases: list[str] = field(default_factory=list)
    engine_families: list[str] = field(default_factory=list)  # that cache in it (empty: all)


@record(kw_only=False)
class ComponentBytes:
    """Weight bytes by component: of a whole checkpoint (read from its files) or of one GPU."""

    embedding: int
    lm_head: int  # 0 when tied to the embedding
    linear: int
    small: int  # norms, biases, routers

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.linear + self.small

    @property
    def read_per_step(self) -> int:
        """Bytes a decode step streams: everything but the embedding table, of which only
        the looked-up rows are read (a tied embedding is read in full as the lm_head)."""
        return self.total - self.embedding + (self.embedding if self.lm_head == 0 else 0)


@record
class SupportGroup(Record):
    """Architectures on which an engine family runs a precision the same way, and why."""

    strict: ClassVar[bool] = False

    level: Annotated[SupportLevel, Check(alias="class")]
    archs: Annotated[list[Architecture], Check(min_length=1)]
    reason: str
    sources: list[str] = field(default_factory=list)
    unconfirmed: bool = False  # read from code or disagreeing docs, not seen working


@record(kw_only=False)
class Support:
    """How a GPU runs one precision under one engine family."""

    level: SupportLevel
    reason: str
    unconfirmed: bool = False
