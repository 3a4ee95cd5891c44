"""The speedup models: one registry that `--speedup-model`, the sweep schema, the panel labels,
the tables and the help text are all generated from.

A model turns the acceptance rate α, the draft length K and the step times of one deployment
into a speedup over plain decoding. Adding one is one `register_speedup_model` call (see
docs/architecture.md, "Extending infersize").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from infersize.errors import UnknownNameError
from infersize.record import record

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from infersize.core.arrays import FloatArray

# The registry holds names, labels and summaries that the command line's help is built from,
# so it imports no numpy: the formulas (core.speculative) are imported when a model first
# prices something, inside the functions below.


@record(kw_only=False)
class StepTimes:
    """Seconds per forward pass, broadcast over the deployment's settings and the K axis."""

    target: FloatArray  # T_target(B, 1): one plain decode step
    draft: FloatArray  # T_draft(B, 1), or T_target / γ when the user gives γ
    verify: FloatArray  # T_target(B, K+1): the verification pass
    latency_ratio: FloatArray  # γ = T_target / T_draft

    @classmethod
    def from_latency_ratio(cls, latency_ratio: ArrayLike) -> StepTimes:
        """Leviathan's setting: a target step of 1, a draft step of 1/γ, and verifying K+1
        tokens as cheap as one target step."""
        import numpy as np

        from infersize.core.arrays import floats

        gamma = floats(latency_ratio)
        one = np.ones_like(gamma)
        return cls(one, floats(one / gamma), one, gamma)


def expected_tokens(alpha: ArrayLike, k: ArrayLike) -> FloatArray:
    """E(α, K), Leviathan eq. 1: `core.speculative.expected_tokens`, the default tokens per
    step of a model (and how a model says it reads α only through E)."""
    from infersize.core import speculative

    return speculative.expected_tokens(alpha, k)


# (α, K) -> tokens per step, and (K, times) -> a speculative step's cost in plain steps
TokensFn = Callable[["FloatArray", "FloatArray"], "FloatArray"]
StepCostFn = Callable[["FloatArray", StepTimes], "FloatArray"]


@record
class SpeedupModel:
    """S = tokens per speculative step / its cost in plain decode steps: a model declares each
    once and the speedup, break-even and the profile's speedup all follow from them."""

    name: str
    label: str  # the panel's speedup line: "Leviathan Speedup"
    summary: str  # one line for --help, the docs and the tables' data dictionary
    step_cost: StepCostFn
    # E(α, K) for the models that count tokens as Leviathan does; a model that reads α only
    # through E can take a per-position acceptance profile (its E) instead of α
    tokens_per_step: TokensFn = expected_tokens
    note: str | None = None  # a caveat printed beside its numbers
    title: str = "LEVIATHAN SPEEDUP"  # the panel title's second half
    qualifier: str = ""  # after the speedup on the panel; {batch} is the batch size

    @property
    def reads_expected_tokens(self) -> bool:
        return self.tokens_per_step is expected_tokens

    def speedup(self, alpha: ArrayLike, k: ArrayLike, times: StepTimes) -> FloatArray:
        from infersize.core.arrays import floats

        n_k = floats(k)
        return floats(self.tokens_per_step(floats(alpha), n_k) / self.step_cost(n_k, times))

    def speedup_from_expected(self, e: ArrayLike, k: ArrayLike, times: StepTimes) -> FloatArray:
        """S from the tokens per step E of a measured profile (models that read α through E)."""
        if not self.reads_expected_tokens:
            raise ValueError(f"speedup model {self.name} takes one α, not a profile")
        from infersize.core.arrays import floats

        return floats(floats(e) / self.step_cost(floats(k), times))


SPEEDUP_MODELS: dict[str, SpeedupModel] = {}


def register_speedup_model(model: SpeedupModel) -> SpeedupModel:
    SPEEDUP_MODELS[model.name] = model
    return model


def get_speedup_model(name: str) -> SpeedupModel:
    model = SPEEDUP_MODELS.get(name.strip().lower())
    if model is None:
        raise UnknownNameError(
            "speedup model", name, SPEEDUP_MODELS, hint=f"choose {', '.join(SPEEDUP_MODELS)}"
        )
    return model


def alpha_for_speedup(
    model: SpeedupModel, speedup: ArrayLike, k: ArrayLike, times: StepTimes
) -> FloatArray:
    """α at which `model` reaches `speedup` at draft length K and these step times (S = 1: the
    break-even α). Every model rises with α at fixed step times, so bisection finds it; NaN
    where no α in [0, 1] reaches it."""
    import numpy as np

    from infersize.core.arrays import floats
    from infersize.core.speculative import bisect_increasing

    n_k = floats(k)
    goal = np.broadcast_to(
        floats(speedup), np.broadcast_shapes(np.shape(speedup), times.target.shape, n_k.shape)
    )
    return bisect_increasing(lambda a: model.speedup(a, n_k, times), goal)


def _leviathan_cost(k: FloatArray, t: StepTimes) -> FloatArray:
    from infersize.core.speculative import leviathan_step_cost

    return leviathan_step_cost(k, t.latency_ratio)


def _roofline_cost(k: FloatArray, t: StepTimes) -> FloatArray:
    from infersize.core.speculative import roofline_step_cost

    return roofline_step_cost(k, t.target, t.draft, t.verify)


def _linear_cost(k: FloatArray, t: StepTimes) -> FloatArray:
    from infersize.core.speculative import linear_step_cost

    return linear_step_cost(k, t.latency_ratio)


def _linear_tokens(alpha: FloatArray, k: FloatArray) -> FloatArray:
    from infersize.core.speculative import linear_tokens

    return linear_tokens(alpha, k)


register_speedup_model(
    SpeedupModel(
        name="leviathan",
        label="Leviathan Speedup",
        summary="Leviathan et al. Theorem 3.8: S = E / (1 + K/γ); verifying K+1 tokens costs one "
        "target step (true at batch 1)",
        step_cost=_leviathan_cost,
    )
)
register_speedup_model(
    SpeedupModel(
        name="roofline",
        label="Leviathan Speedup",
        summary="S = E · T(B,1) / (K · T_draft(B,1) + T(B,K+1)): verification priced by the "
        "roofline step time, so the speedup falls as the batch grows",
        step_cost=_roofline_cost,
        qualifier=" (roofline, batch {batch})",
    )
)
register_speedup_model(
    SpeedupModel(
        name="linear",
        label="Linear Speedup",
        summary="S = (1 + αK) / (1 + (K+1)/γ), the seed example's linear formula; "
        "not Leviathan's theorem, it overstates the speedup",
        step_cost=_linear_cost,
        tokens_per_step=_linear_tokens,
        note="speedup model 'linear' is the linear formula S = (1 + αK) / (1 + (K+1)/γ), not "
        "Leviathan's Theorem 3.8; it overstates the speedup",
        title="LINEAR-FORMULA SPEEDUP",
        qualifier=" (linear formula, not Leviathan's theorem)",
    )
)
