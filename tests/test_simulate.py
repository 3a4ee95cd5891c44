"""The serving simulator's invariants: one request at a time is the step model's prefill and
decode steps; Little's law; no waiting far below the knee; capacity rises with a looser SLA and
never passes what a saturated replica sustains; K = 0 is plain decoding exactly; same seed,
same bytes. Deployments are catalog models on catalog GPUs under the vLLM preset."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from infersize.core.serving.metrics import metrics
from infersize.core.serving.replica import Load
from infersize.core.serving.simulate import simulate
from infersize.core.serving.sla import parse_sla
from infersize.core.serving.step import StepBatch, engine_step_seconds
from infersize.service.capacity.arm import make_arm, serve
from infersize.service.capacity.request import Traffic
from infersize.service.capacity.search import capacity
from tests.support.serving import INPUT, OUTPUT, prepared_for


def traffic(**given):
    values = {
        "input_tokens": (INPUT,),
        "output_tokens": (OUTPUT,),
        "request_rate": 1.0,
        "requests": 400,
        "seed": 7,
    } | given
    return Traffic(**values)


@pytest.mark.parametrize("k", [0, 3])
def test_one_request_at_a_time_is_the_prefill_step_then_the_decode_step(catalog, k):
    """Closed loop of one client: TTFT is the step model's prefill of the prompt alone, and
    TPOT the mean decode step over the contexts the request passes through (the step time is
    affine in the context, so the mean step is the step at the mean context)."""
    prepared = prepared_for(catalog)
    arm = make_arm(prepared, traffic(), k)
    measured = serve(arm, traffic(concurrency=1, request_rate=None, requests=20))
    numbers = prepared.deployment.numbers
    draft = numbers.draft if k else None
    prefill = StepBatch(
        decode_seqs=0,
        draft_k=k,
        decode_context=0.0,
        prefill_tokens=INPUT,
        prefill_attended=INPUT * (INPUT + 1) / 2,
        target_kv_bytes=float(numbers.target.kv.full_bytes_per_token) * INPUT,
        draft_kv_bytes=0.0 if draft is None else float(draft.kv.full_bytes_per_token) * INPUT,
    )
    ttft = float(engine_step_seconds(numbers.target, draft, prepared.engine, prefill).total)
    assert measured.ttft_s.mean == pytest.approx(ttft, rel=1e-9)
    assert measured.ttft_s.p99 == pytest.approx(ttft, rel=1e-9)
    if k == 0:  # every decode step emits one token: O − 1 steps, contexts I .. I + O − 2
        mean_context = INPUT + (OUTPUT - 2) / 2
        step = StepBatch(
            decode_seqs=1,
            draft_k=0,
            decode_context=mean_context,
            target_kv_bytes=float(numbers.target.kv.full_bytes_per_token) * mean_context,
        )
        tpot = float(engine_step_seconds(numbers.target, None, prepared.engine, step).total)
        assert measured.tpot_s.mean == pytest.approx(tpot, rel=1e-9)
        assert measured.tpot_s.p99 == pytest.approx(tpot, rel=1e-9)
    assert measured.queue_delay_s.p99 == 0.0  # each request starts the moment it is sent


@pytest.mark.parametrize("rate", [2.0, 8.0])
def test_littles_law_holds_for_the_running_sequences(catalog, rate):
    """Mean running sequences = throughput × mean time running; below the knee (no queue) the
    time running is the e2e latency less a part of a step (of two where the scheduler runs a
    step ahead), so the e2e form holds within 2 % (4 %)."""
    arm = make_arm(prepared_for(catalog), traffic(), 3)
    run = simulate(arm.replica, load_at(arm, traffic(), rate))
    measured = metrics(run)
    running = run.finish - run.admitted
    assert measured.mean_running_sequences == pytest.approx(
        measured.requests_per_s * running.mean(), rel=1e-9
    )
    # not running: a part of a step, or of two where the scheduler runs a step ahead
    steps = 2 if arm.replica.schedules_ahead else 1
    assert measured.mean_running_sequences == pytest.approx(
        measured.requests_per_s * measured.e2e_s.mean, rel=0.02 * steps
    )


def load_at(arm, given, rate):
    n = given.requests
    gaps = np.random.default_rng(3).exponential(1.0, n)
    return Load(
        input_tokens=np.full(n, INPUT),
        output_tokens=np.full(n, OUTPUT),
        steps=arm.steps[:n],
        arrivals=np.cumsum(gaps) / rate,
    )


def test_far_below_the_knee_no_request_waits(catalog):
    """At a tenth of a request a second no request waits longer than the step running when it
    arrives (and, when the scheduler runs a step ahead, the next, chosen before it came), and
    none is preempted."""
    arm = make_arm(prepared_for(catalog), traffic(), 3)
    measured = serve(arm, traffic(request_rate=0.1))
    steps = 2 if arm.replica.schedules_ahead else 1
    longest_step = measured.itl_s.p99 * 1.5
    assert measured.queue_delay_s.p99 <= steps * longest_step
    assert measured.preemptions == 0


def test_capacity_rises_as_the_sla_loosens_and_its_queue_is_stable(catalog):
    arm = make_arm(prepared_for(catalog), traffic(), 3)
    tight = capacity(arm, traffic(), parse_sla("ttft:p99<=300ms;tpot:p99<=9ms"))
    loose = capacity(arm, traffic(), parse_sla("ttft:p99<=2000ms;tpot:p99<=30ms"))
    assert 0 < tight.max_request_rate < loose.max_request_rate
    assert not serve(arm, traffic(), loose.max_request_rate).overload


def test_an_sla_one_request_alone_breaks_is_an_answer_of_zero(catalog):
    arm = make_arm(prepared_for(catalog), traffic(), 3)
    answer = capacity(arm, traffic(), parse_sla("ttft:p99<=1ms"))
    assert answer.max_request_rate == 0.0
    assert answer.why.startswith("one request alone already breaks the SLA (ttft:p99 ")


def test_k_zero_is_plain_decoding_exactly(catalog):
    """The speculative arm at K = 0 does not load its drafter: the same replica and the same
    run, byte for byte, as the target alone."""
    with_draft = make_arm(prepared_for(catalog), traffic(), 0)
    alone = make_arm(prepared_for(catalog, draft=None), traffic(), 0)
    assert with_draft.replica == alone.replica
    a = simulate(with_draft.replica, load_at(with_draft, traffic(), 4.0))
    b = simulate(alone.replica, load_at(alone, traffic(), 4.0))
    for field in dataclasses.fields(a):
        left, right = getattr(a, field.name), getattr(b, field.name)
        if isinstance(left, np.ndarray):
            assert np.array_equal(left, right, equal_nan=True), field.name
        else:
            assert left == right, field.name


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not(catalog):
    prepared = prepared_for(catalog)

    def run(seed):
        given = traffic(seed=seed)
        arm = make_arm(prepared, given, 3)
        return metrics(simulate(arm.replica, load_at(arm, given, 4.0)))

    assert repr(run(7)) == repr(run(7))
    assert repr(run(7)) != repr(run(8))


@pytest.mark.parametrize(
    "model", ["llama-3.1-8b", "gemma-2-9b", "qwen3-next-80b-a3b", "mistral-7b-v0.1"]
)
def test_the_simulators_kv_bytes_are_the_memory_models(catalog, model):
    """Full, sliding-window and linear-attention layers: the plain-float KV of one sequence is
    core/memory.kv_cache_bytes at batch 1, at contexts below and past the window."""
    from infersize.core.memory import kv_cache_bytes, kv_layout
    from infersize.core.serving.replica import layout_floats
    from infersize.core.serving.step_math import sequence_kv

    layout = kv_layout(catalog.model(model), catalog.kv_dtype("fp16"))
    for context in (1, 100, 4095, 4096, 5000, 100_000):
        exact = float(kv_cache_bytes(layout, context, 1))
        assert sequence_kv(layout_floats(layout), float(context)) == pytest.approx(exact, abs=1.0)
