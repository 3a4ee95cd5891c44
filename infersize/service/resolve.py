"""Names as a user gives them (catalog ids, folders, GGUF files, hf: ids) resolved through the
catalog into a `Deployment` the core can evaluate. `spec`, the sweep and the figures all resolve
through here: one pairing rule, one price rule, one place that reads checkpoints."""

from __future__ import annotations

import math
from dataclasses import replace

from infersize.catalog.records import Gpu, KvDtype, Model, Support
from infersize.catalog.sources import resolve_format, resolve_model
from infersize.catalog.store import Catalog
from infersize.core.deployment import (
    DeploymentNumbers,
    Side,
    check_pair,
    deployment_numbers,
    prepare_side,
)
from infersize.core.engines import SGLANG_SSM_DTYPE, Engine
from infersize.core.methods import Method, get_method, method_of
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, ValueRangeError
from infersize.record import record


@record
class DeploymentRequest:
    """A deployment by name. The draft runs at the target's tensor parallelism under engines
    that do so (vLLM V1), else unsplit on the first GPU."""

    target: str
    gpu: str
    target_quant: str = DEFAULTS.target_quant
    draft: str | None = None  # None: the target alone
    draft_quant: str = DEFAULTS.draft_quant
    kv_dtype: str = DEFAULTS.kv_dtype
    tp: int = DEFAULTS.tp
    price_usd_per_hour: float | None = None
    allow_cross_tokenizer: bool = False
    method: str | None = None  # a speculative method (core/methods.py): picks or checks the draft


@record
class Deployment:
    target: Side
    draft: Side | None
    gpu: Gpu
    kv_dtype: KvDtype
    engine: Engine
    numbers: DeploymentNumbers
    support: Support  # the least supported of the target's and the draft's precisions


LEVELS = ("native", "weight-only", "unsupported")


def combined_support(sides: dict[str, tuple[str, Support]]) -> Support:
    """The least supported side decides; the reason names it ("target fp8: ...")."""
    role, (precision, worst) = max(sides.items(), key=lambda s: LEVELS.index(s[1][1].level))
    if worst.level == "native" and not worst.unconfirmed:
        return worst
    return Support(worst.level, f"{role} {precision}: {worst.reason}", worst.unconfirmed)


def resolve_side(
    name: str,
    quant: str,
    catalog: Catalog,
    kv: KvDtype,
    gpu: Gpu,
    tp: int = 1,
    family: str = "vllm",
    dp_attention: bool = False,
    engine: Engine | None = None,
    target_architecture: str | None = None,
) -> tuple[Side, Support]:
    """`quant` 'auto' means the checkpoint's own precision. When the precision is the
    checkpoint's own and its files were read, the weights are the files' exact bytes. The GPU's
    support of the precision under the engine family decides how the step is priced.
    `engine`: whose rule sets the linear-attention states' dtype (ssm_state_dtype; None: the
    model's own) and whether the side's all-reduces are fused (core/allreduce.py, decided by
    `target_architecture`, the deployment's target's; None: this side is the target), which
    also names whose MoE layer cost a drafter's MoE layers take (an MTP layer's: its target's)."""
    source = resolve_model(name, catalog)
    if source.model.speculator == "ngram":  # nothing to store or run on the GPU
        fmt = catalog.weight_format("none")
        return prepare_side(source.model, fmt, kv, gpu, tp), Support("native", "no weights")
    fmt = resolve_format(source, quant, catalog)
    support = catalog.support(fmt.id, gpu, family)
    if quant.strip().lower() == "auto" and fmt.id == "bf16" and support.level == "unsupported":
        # as vLLM advises (--dtype half): fp16 has bf16's bytes and runs where bf16 cannot
        fmt = catalog.weight_format("fp16")
        support = catalog.support("fp16", gpu, family)
    weight_only = support.level == "weight-only"
    exact = source.exact_weights(fmt)
    ssm_dtype = None if engine is None else ssm_state_dtype(engine, catalog, source.model)
    fusion = None if engine is None else engine.allreduce_fusion
    own = source.model.architecture
    target = target_architecture or own  # whose flags and MoE layer cost the side takes
    fused = (
        fusion is not None
        and tp > 1
        and not dp_attention
        and fusion.fuses(target, own, gpu.architecture or "")
    )
    side = prepare_side(
        source.model,
        fmt,
        kv,
        gpu,
        tp,
        exact,
        weight_only,
        dp_attention,
        ssm_dtype,
        fused,
        moe_layer_s=math.nan if engine is None else engine.moe_layer_cost_s(target),
    )
    return side, support


def ssm_dtype_name(engine: Engine, model: Model) -> str | None:
    """The dtype, as SGLang names it, the engine holds `model`'s linear-attention recurrent
    states in: its --mamba-ssm-dtype where set (a user's, or the preset's: SGLang to 0.5.6
    always float32); under SGLang's rules from 0.5.9 (the setting None) the model config's
    mamba_ssm_dtype, else float32 (mamba2_state_dtype); None elsewhere: the model's own (vLLM)."""
    if engine.mamba_ssm_dtype is not None:
        return engine.mamba_ssm_dtype
    if engine.memory_rule != "sglang":
        return None
    return model.mamba_ssm_dtype or SGLANG_SSM_DTYPE


def ssm_state_dtype(engine: Engine, catalog: Catalog, model: Model) -> KvDtype | None:
    """ssm_dtype_name's dtype from the precision catalog (None: the model's own)."""
    name = ssm_dtype_name(engine, model)
    return None if name is None else catalog.kv_dtype(name)


def published_head(target: Model, method: Method, catalog: Catalog) -> Model:
    """The catalog's drafter of `method` trained for `target` (n-gram: the lookup itself)."""
    if method.speculator == "ngram":
        return catalog.model("ngram")
    heads = [
        m
        for m in catalog.models.records.values()
        if m.speculator == method.speculator and target.id in m.speculator_for
    ]
    if not heads:
        known = sorted(
            t
            for m in catalog.models.records.values()
            if m.speculator == method.speculator
            for t in m.speculator_for
        )
        have = f"; the catalog has {method.name} drafters for {', '.join(known)}" if known else ""
        raise InfersizeError(
            f"no published {method.name} drafter for {target.id} in the catalog{have}; give "
            "{draft} (a catalog id, a folder or hf:ID)",
            settings=("draft",),
        )
    return sorted(heads, key=lambda m: m.id)[0]


def with_method(req: DeploymentRequest, catalog: Catalog) -> DeploymentRequest:
    """The request with its draft settled by --method: the published drafter when no draft is
    given (method 'draft' needs one), and a check that a given draft runs that method."""
    if req.method is None:
        return req
    method = get_method(req.method)
    target = resolve_model(req.target, catalog).model
    if req.draft is None:
        if method.speculator is None:
            raise InfersizeError(
                "{method} draft needs {draft} (the draft model)", settings=("method", "draft")
            )
        return replace(req, draft=published_head(target, method, catalog).id)
    drafter = resolve_model(req.draft, catalog).model
    if method_of(drafter) != method:
        raise InfersizeError(
            f"{drafter.id} is a {method_of(drafter).name} drafter, not {method.name}: drop "
            "{method} or give a matching {draft}",
            settings=("method", "draft"),
        )
    return req


def check_expert_parallel(model: Model, tp: int, ep: int) -> None:
    """Expert parallelism splits a MoE target's routed experts over groups of its TP ranks:
    `ep` must divide the TP size and the experts."""
    if ep <= 1:
        return
    if model.moe is None:
        raise ValueRangeError("ep", f"({ep}) splits routed experts: {model.id} has none")
    if tp % ep or model.moe.num_experts % ep:
        raise ValueRangeError(
            "ep",
            f"({ep}) must divide {{tp}} ({tp}) and {model.id}'s {model.moe.num_experts} routed "
            "experts",
        )


def resolve_deployment(req: DeploymentRequest, catalog: Catalog, engine: Engine) -> Deployment:
    req = with_method(req, catalog)
    gpu = catalog.gpu(req.gpu)
    kv_dtype = catalog.kv_dtype(req.kv_dtype)
    family = engine.support_family
    target, t_support = resolve_side(
        req.target,
        req.target_quant,
        catalog,
        kv_dtype,
        gpu,
        req.tp,
        family,
        engine.dp_attention,
        engine,
    )
    check_expert_parallel(target.model, req.tp, engine.ep)
    sides = {"target": (target.fmt.id, t_support)}
    draft = None
    if req.draft is not None:
        draft_tp = req.tp if engine.draft_shares_tp else 1  # vLLM V1, SGLang: the target's TP
        draft, d_support = resolve_side(
            req.draft,
            req.draft_quant,
            catalog,
            kv_dtype,
            gpu,
            draft_tp,
            family,
            engine.dp_attention and draft_tp > 1,
            engine,
            target.model.architecture,
        )
        sides["draft"] = (draft.fmt.id, d_support)
    check_pair(target.model, None if draft is None else draft.model, req.allow_cross_tokenizer)
    numbers = deployment_numbers(target, draft, gpu, req.price_usd_per_hour, engine)
    return Deployment(
        target=target,
        draft=draft,
        gpu=gpu,
        kv_dtype=kv_dtype,
        engine=engine,
        numbers=numbers,
        support=combined_support(sides),
    )
