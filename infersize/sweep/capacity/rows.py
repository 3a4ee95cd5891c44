"""A capacity sweep's rows before their answers: a setting under a workload, an SLA and an α
scenario (a Case), each the `infersize capacity --draft-k auto` request it asks (K over the
sweep's), in the order the table runs."""

from __future__ import annotations

from collections.abc import Iterator

from infersize.core.serving.sla import parse_sla
from infersize.core.serving.traffic import parse_arrival
from infersize.defaults import DEFAULTS
from infersize.record import record
from infersize.service.capacity.confirm import Row
from infersize.service.capacity.request import CapacityRequest, Traffic
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
from infersize.sweep.settings import CapacityPlan, Scoring, Setting, Workload


@record
class Case:
    """A row before its target rates: a setting under a workload, an SLA and an α scenario."""

    setting: Setting
    workload: Workload
    sla_name: str
    sla: str
    scenario: int

    @property
    def group(self) -> tuple[str, str, str, str]:
        return (self.setting.gpu, self.setting.target, self.workload.name, self.sla_name)


def iter_cases(settings: tuple[Setting, ...], plan: CapacityPlan, scenarios: int) -> Iterator[Case]:
    for setting in settings:
        for workload in plan.workloads:
            for sla_name, sla in plan.slas:
                for scenario in range(scenarios):
                    yield Case(
                        setting=setting,
                        workload=workload,
                        sla_name=sla_name,
                        sla=sla,
                        scenario=scenario,
                    )


def capacity_request(
    case: Case, scoring: Scoring, max_k: int, plan: CapacityPlan
) -> CapacityRequest:
    """The `infersize capacity --draft-k auto` request a row answers (K over the sweep's)."""
    s, w = case.setting, case.workload
    deployment = DeploymentRequest(
        target=s.target,
        gpu=s.gpu,
        target_quant=s.target_quant,
        draft=s.draft,
        draft_quant=s.draft_quant,
        kv_dtype=s.kv_dtype,
        tp=s.tp,
        price_usd_per_hour=s.price_usd_per_hour,
        allow_cross_tokenizer=True,
    )
    tree = scoring.eagle_topk > 1
    spec = SpecRequest(
        deployment=deployment,
        engine=scoring.engine,
        max_k=max_k,
        draft_k=min(DEFAULTS.draft_k, max_k),  # --draft-k auto chooses; any K in range will do
        context_length=w.longest_request_tokens,
        acceptance_rate=None if s.profile else s.alpha_on(w.kind, case.scenario),
        acceptance_rates=s.profile,
        acceptance_positions=s.acceptance_positions,
        eagle_topk=scoring.eagle_topk,
        num_draft_tokens=scoring.num_draft_tokens if tree else None,
    )
    traffic = Traffic(
        input_tokens=w.input_tokens,
        output_tokens=w.output_tokens,
        lengths_file=w.lengths_file,
        request_rate=w.target_request_rates[0],
        arrival=parse_arrival(w.arrival),
        requests=plan.requests,
        seed=plan.seed,
    )
    return CapacityRequest(
        spec=spec,
        draft_k_auto=True,
        traffic=traffic,
        sla=parse_sla(case.sla),
        target_request_rate=w.target_request_rates[0],
        headroom=plan.headroom,
        replications=plan.replications,
        itl_at_load=False,  # no column reads them
    )


def capacity_row(case: Case, scoring: Scoring, max_k: int, plan: CapacityPlan) -> Row:
    """The case as the service answers it: its request, its target rates, its group."""
    return Row(
        request=capacity_request(case, scoring, max_k, plan),
        rates=case.workload.target_request_rates,
        group=case.group,
        tp=case.setting.tp,
    )
