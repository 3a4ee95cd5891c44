"""A `spec` request (everything `infersize spec` is asked, by name), checked, and resolved into
what the evaluation needs: `spec`, its figures and `capacity` start from the same `Prepared`."""

from __future__ import annotations

import math
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from infersize.bounds import EAGLE_TOPK, PRICE_USD_PER_HOUR, TREE_TOKENS
from infersize.catalog.store import Catalog
from infersize.catalog.workload_kinds import workload_kind
from infersize.core.arrays import FloatArray
from infersize.core.engines import Engine, EngineSettings, configure_engine
from infersize.core.evaluate import MAX_K, Evaluation, Grid, evaluate
from infersize.core.limits import crossover_batch
from infersize.core.profile import (
    expected_tokens_profile,
    extend_profile,
    iid_profile,
    limit_positions,
    profile_problem,
)
from infersize.core.speculative import alpha_for_expected_tokens
from infersize.core.speedup import SpeedupModel, get_speedup_model
from infersize.core.tree import CHAIN, Tree, alpha_for_tree_length, most_tokens
from infersize.defaults import DEFAULTS
from infersize.errors import ValueRangeError
from infersize.record import record
from infersize.service.resolve import Deployment, DeploymentRequest, resolve_deployment

if TYPE_CHECKING:
    from infersize.service.acceptance import PairAcceptance


@record
class SpecRequest:
    """Everything `infersize spec` is asked, by name. Field names are the flags' names."""

    deployment: DeploymentRequest
    context_length: int = DEFAULTS.context_length  # tokens in each sequence's KV at decode
    # (input, output) tokens the context came from (input + output/2), when given so
    decode_lengths: tuple[int, int] | None = None
    acceptance_rate: float | None = None  # None: published for the pair, else the prior
    draft_k: int = DEFAULTS.draft_k
    batch_size: int = DEFAULTS.batch_size
    speedup_model: str | None = None  # None: default_speedup_model(latency_ratio)
    latency_ratio: float | None = None
    max_k: int = DEFAULTS.max_k
    engine: EngineSettings = field(default_factory=EngineSettings)
    acceptance_rates: tuple[float, ...] | None = None  # per position, as vLLM logs them
    # mean tokens per step at draft_k (and the tree), as engines log it: instead of α
    acceptance_length: float | None = None
    eagle_topk: int = DEFAULTS.eagle_topk  # 1: a chain of draft_k; more: a tree of that width
    num_draft_tokens: int | None = None  # a tree's verified tokens, root included
    # the positions the α given holds for (its measured K): none is credited past them;
    # None: all (i.i.d.). Without an α, the acceptance catalog's own (service/acceptance.py)
    acceptance_positions: int | None = None
    # the kind of traffic (chat, code, ...): which published acceptance speaks for it
    workload_kind: str | None = None


def _finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise ValueRangeError(name, f"must be a finite number, got {value}")


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ValueRangeError(name, f"must be at least {low}, got {value}")


def validate_request(req: SpecRequest) -> None:
    """One clear message per mistake, naming the setting."""
    if req.acceptance_rate is not None:
        _finite("acceptance_rate", req.acceptance_rate)
        if not 0.0 <= req.acceptance_rate <= 1.0:
            raise ValueRangeError(
                "acceptance_rate", f"must be in [0, 1], got {req.acceptance_rate}"
            )
    if req.acceptance_rates is not None:
        if req.acceptance_rate is not None:
            raise ValueRangeError(
                "acceptance_rates", "cannot be given with {acceptance_rate}: one or the other"
            )
        if problem := profile_problem(req.acceptance_rates):
            raise ValueRangeError("acceptance_rates", problem)
    if req.acceptance_length is not None and (
        req.acceptance_rate is not None or req.acceptance_rates is not None
    ):
        raise ValueRangeError(
            "acceptance_length",
            "cannot be given with {acceptance_rate} or {acceptance_rates}: one of the three",
        )
    _at_least("draft_k", req.draft_k, 1)
    if req.acceptance_positions is not None:
        _at_least("acceptance_positions", req.acceptance_positions, 1)
    _validate_tree(req)
    if req.max_k > MAX_K:
        raise ValueRangeError("max_k", f"must be at most {MAX_K}, got {req.max_k}")
    if req.max_k < req.draft_k:
        raise ValueRangeError(
            "max_k", f"({req.max_k}) must be at least {{draft_k}} ({req.draft_k})"
        )
    _at_least("context_length", req.context_length, 1)
    _at_least("batch_size", req.batch_size, 1)
    if req.latency_ratio is not None:
        _finite("latency_ratio", req.latency_ratio)
        if not 0.01 <= req.latency_ratio <= 1e6:
            raise ValueRangeError(
                "latency_ratio",
                f"must be in [0.01, 1e6] (target step / draft step), got {req.latency_ratio:g}",
            )
    price = req.deployment.price_usd_per_hour
    if price is not None:
        PRICE_USD_PER_HOUR.check(price)


def _validate_tree(req: SpecRequest) -> None:
    """A chain (eagle_topk 1) verifies draft_k + 1 tokens; a tree needs its verified tokens."""
    EAGLE_TOPK.check(req.eagle_topk)
    n = req.num_draft_tokens
    if req.eagle_topk == 1:
        if n is not None and n != req.draft_k + 1:
            raise ValueRangeError(
                "num_draft_tokens",
                f"must be {{draft_k}} + 1 = {req.draft_k + 1} for a chain ({{eagle_topk}} 1), "
                f"got {n}: leave it out, or draft a tree",
            )
        return
    if n is None:
        raise ValueRangeError(
            "num_draft_tokens",
            f"is needed for a tree ({{eagle_topk}} {req.eagle_topk}): the tokens the target "
            "verifies per sequence, the root included",
        )
    TREE_TOKENS.check(n)


CONTEXT_STRETCH = 8  # rope scaling (YaRN, linear) rarely stretches a model further


def _check_context(context_length: int, dep: Deployment) -> None:
    """A context far past what the target was built for is a typo, not a deployment."""
    limit = CONTEXT_STRETCH * dep.target.model.max_position_embeddings
    if context_length > limit:
        raise ValueRangeError(
            "context_length",
            f"({context_length:,}) is more than {CONTEXT_STRETCH}x {dep.target.model.id}'s "
            f"max_position_embeddings ({dep.target.model.max_position_embeddings:,}); rope "
            "scaling rarely stretches a model further",
        )


def _check_draft_k(draft_k: int, dep: Deployment) -> None:
    """Medusa heads and MLP-speculator stages propose at most one token each."""
    head = None if dep.draft is None else dep.draft.model
    if head is not None and head.speculator_heads is not None and draft_k > head.speculator_heads:
        raise ValueRangeError(
            "draft_k",
            f"must be at most {head.speculator_heads}: {head.id} proposes one token per head",
        )


def _check_state_dtype(req: SpecRequest, dep: Deployment) -> None:
    """--mamba-ssm-dtype sets the state of linear-attention layers: on a deployment without
    any it would change nothing, which is a mistake worth saying."""
    if "mamba_ssm_dtype" not in dict(req.engine.given):
        return
    sides = (dep.target, dep.draft) if dep.draft is not None else (dep.target,)
    if all(side.model.linear_attention is None for side in sides):
        raise ValueRangeError(
            "mamba_ssm_dtype",
            f"applies to models with linear-attention layers: {dep.target.model.id} has none",
        )


def default_speedup_model(latency_ratio: float | None) -> str:
    """Leviathan's batch-1 theorem when the user gives γ; otherwise the roofline model, which
    prices verification at the batch asked."""
    if latency_ratio is not None:
        return DEFAULTS.speedup_model_given_latency_ratio
    return DEFAULTS.speedup_model


def _same_length_alpha(rates: FloatArray, draft_k: int) -> float:
    """The i.i.d. α whose chain at `draft_k` accepts as many tokens a step as `rates`."""
    k = min(draft_k, rates.shape[-1])
    return float(alpha_for_expected_tokens(expected_tokens_profile(rates, [k])[0], k))


def _profile(
    given: tuple[float, ...] | None,
    req: SpecRequest,
    model: SpeedupModel,
    alpha: float,
    positions: int | None,
    published: bool = False,
) -> tuple[FloatArray | None, float, int | None]:
    """The rates r_1..r_max_k the request is priced at, the i.i.d. α with the same mean
    acceptance length at the K asked, and the positions past which nothing is credited:
    a profile (given or published) extended past its end, or α^i; either cut at `positions`
    (limit_positions), which is None where nothing is cut (every position within max_k, or a
    speedup model that takes one α). A published profile under such a model is priced at its
    same-length α alone; a given one is refused."""
    rates = None if given is None else extend_profile(given, req.max_k)
    if rates is not None and not model.reads_expected_tokens:
        if not published:
            raise ValueRangeError(
                "acceptance_rates",
                f"cannot be used with speedup model {model.name}, which takes one α "
                "({acceptance_rate})",
            )
        return None, _same_length_alpha(rates, req.draft_k), None
    if positions is not None and positions < req.max_k and model.reads_expected_tokens:
        rates = limit_positions(
            iid_profile(alpha, req.max_k) if rates is None else rates, positions
        )
    else:
        positions = None
    if given is not None and rates is not None:
        alpha = _same_length_alpha(rates, req.draft_k)
    return rates, alpha, positions


@record
class Prepared:
    """A request checked and resolved: the deployment, its engine and speedup model, and the
    acceptance it is priced at (α, or a per-position profile with its same-length α)."""

    request: SpecRequest
    deployment: Deployment
    engine: Engine
    model: SpeedupModel
    alpha: float
    acceptance: PairAcceptance | None  # where α came from, when the user gave none
    rates: FloatArray | None  # the per-position profile extended to max_k
    tree: Tree = CHAIN
    positions: int | None = None  # positions past it are not credited (limit_positions)
    # r_1, r_2, … as given or published for the pair (before extending); None: α alone
    profile: tuple[float, ...] | None = None

    @property
    def ks(self) -> np.ndarray:
        return np.arange(1, self.request.max_k + 1)

    def grid(self, batch: ArrayLike | None = None) -> Grid:
        """The request's cell over K = 1 .. max_k; `batch` replaces its batch size (an array
        of batch sizes gives one curve per K)."""
        req = self.request
        rates = self.rates
        if rates is not None and batch is not None:
            rates = rates[None, :]  # the batch axis comes before the positions
        return Grid(
            context=req.context_length,
            batch=req.batch_size if batch is None else batch,
            alpha=self.alpha,
            ks=self.ks,
            latency_ratio=req.latency_ratio,
            rates=rates,
            tree=self.tree,
        )

    def evaluate(self, batch: ArrayLike | None = None) -> Evaluation:
        return evaluate(self.deployment.numbers, self.engine, self.model, self.grid(batch))

    def crossover_batch(self) -> int | None:
        """The first batch at which speculation at the K asked stops paying (this model)."""
        req = self.request
        crossover = float(
            crossover_batch(
                self.deployment.numbers,
                self.engine,
                self.model,
                req.context_length,
                self.alpha,
                req.draft_k,
                req.latency_ratio,
                self.rates,
                self.tree,
            )
        )
        return None if math.isnan(crossover) else int(crossover)


def _alpha(
    asked: float | None, req: SpecRequest, dep: Deployment, catalog: Catalog
) -> tuple[float, PairAcceptance | None]:
    """The α asked, else the pair's from the acceptance catalog (whose code loads only then);
    a per-position profile brings its own. The workload kind is checked unless rates are given."""
    if req.acceptance_rates is not None:
        return 0.0, None
    kind = _kind(req)
    if asked is not None:
        return asked, None
    from infersize.service.acceptance import resolve_alpha

    return resolve_alpha(asked, dep, catalog, kind)


def prepare(req: SpecRequest, catalog: Catalog) -> Prepared:
    """Check the request, resolve the deployment and settle the acceptance it is priced at."""
    validate_request(req)
    engine = configure_engine(req.engine)
    model = get_speedup_model(req.speedup_model or default_speedup_model(req.latency_ratio))
    dep = resolve_deployment(req.deployment, catalog, engine)
    _check_context(req.context_length, dep)
    _check_draft_k(req.draft_k, dep)
    _check_state_dtype(req, dep)
    tree = _tree(req, engine, model)
    asked = req.acceptance_rate
    if req.acceptance_length is not None:
        asked = _alpha_from_length(req.acceptance_length, req.draft_k, tree)
    alpha, acceptance = _alpha(asked, req, dep, catalog)
    given, positions = req.acceptance_rates, req.acceptance_positions
    if acceptance is not None:
        given, positions = acceptance.profile, acceptance.positions
    rates, alpha, positions = _profile(
        given, req, model, alpha, positions, published=acceptance is not None
    )
    return Prepared(
        request=req,
        deployment=dep,
        engine=engine,
        model=model,
        alpha=alpha,
        acceptance=acceptance,
        rates=rates,
        tree=tree,
        positions=positions,
        profile=given if given is not None and model.reads_expected_tokens else None,
    )


def _kind(req: SpecRequest) -> str | None:
    return None if req.workload_kind is None else workload_kind(req.workload_kind)


def _tree(req: SpecRequest, engine: Engine, model: SpeedupModel) -> Tree:
    """The request's draft shape; a tree only where the engine and the speedup model take one."""
    if req.eagle_topk == 1:
        return CHAIN
    if not engine.drafts_trees:
        raise ValueRangeError(
            "eagle_topk",
            f"above 1 drafts a tree, which engine {engine.name} does not: SGLang (sglang) and "
            "TensorRT-LLM (trtllm) do",
        )
    if not model.reads_expected_tokens:
        raise ValueRangeError(
            "eagle_topk",
            f"above 1 drafts a tree, which speedup model {model.name} cannot price: it takes one α",
        )
    return Tree(req.eagle_topk, req.num_draft_tokens)


def _alpha_from_length(length: float, draft_k: int, tree: Tree) -> float:
    """The i.i.d. α whose chain (or tree) at draft_k accepts `length` tokens per step."""
    alpha = float(alpha_for_tree_length(length, tree, draft_k))
    if math.isnan(alpha) or math.isnan(length):  # NaN is no length, not "none accepted"
        most = most_tokens(tree, draft_k)
        raise ValueRangeError(
            "acceptance_length",
            f"must be in [1, {most:g}] at {{draft_k}} {draft_k} (1 + accepted drafts per "
            f"step), got {length:g}",
        )
    return alpha
