"""`capacity --k-schedule`: K chosen each step by the running batch in the simulator, the table
read from `auto` or from the files engines and `schedule` write, compared with the best static
K and K = 0."""

from __future__ import annotations

import dataclasses
import json

import pytest

from infersize.catalog.store import load_catalog
from infersize.cli import app
from infersize.core.engines import EngineSettings
from infersize.core.serving.replica import KSwitch, switched_replica
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.arm import make_arm, serve
from infersize.service.capacity.ktable import BEYOND, read_k_schedule
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
from tests.support import readme

README_DEPLOYMENT = ["capacity", *readme.TARGET, "--draft", "llama-3.2-1b", *readme.LOAD]
SLA, QUICK = readme.SLA, readme.QUICK


def _prepared(requests=300, concurrency=None):
    spec = SpecRequest(
        deployment=DeploymentRequest(target="llama-3.1-8b", draft="llama-3.2-1b", gpu="h100", tp=1),
        engine=EngineSettings("vllm"),
        acceptance_rate=0.7,
        context_length=640,
    )
    traffic = Traffic(
        input_tokens=(512,),
        output_tokens=(128,),
        request_rate=None if concurrency else 4.0,
        concurrency=concurrency,
        requests=requests,
    )
    req = CapacityRequest(spec=spec, traffic=traffic, sla=parse_sla("tpot:p99<=50ms"))
    return prepare_capacity(req, load_catalog(())), traffic


def _switched(prepared, traffic, ranges):
    arm = make_arm(prepared, traffic, max(k for _, k in ranges))
    replica = switched_replica(prepared.deployment.numbers, prepared.engine, ranges)
    return dataclasses.replace(arm, replica=replica)


@pytest.mark.parametrize("k", [1, 3])
def test_a_table_of_one_k_serves_exactly_as_that_k(k):
    prepared, traffic = _prepared()
    static = serve(make_arm(prepared, traffic, k), traffic)
    switched = serve(_switched(prepared, traffic, ((BEYOND, k),)), traffic)
    assert switched == static


def test_k_follows_the_running_batch():
    # one client keeps one request running: the table's K at batch 1 serves every step; 32
    # clients keep the batch above 1 but at each run's last requests, so K = 0 serves nearly
    # every step and the TPOT is plain decoding's within the tail's few steps
    one, traffic = _prepared(requests=100, concurrency=1)  # the fewest a p99 needs
    table = ((1, 3), (BEYOND, 0))
    assert serve(_switched(one, traffic, table), traffic) == serve(
        make_arm(one, traffic, 3), traffic
    )
    many, traffic = _prepared(requests=300, concurrency=32)
    switched = serve(_switched(many, traffic, table), traffic).tpot_s.p50
    plain = serve(make_arm(many, traffic, 0), traffic).tpot_s.p50
    at_three = serve(make_arm(many, traffic, 3), traffic).tpot_s.p50
    assert abs(switched - plain) < abs(switched - at_three)
    assert switched == pytest.approx(plain, rel=0.05)


def test_the_switch_reads_ranges_as_vllm_does():
    switch = KSwitch(last_batch=(4, 16, BEYOND), draft_k=(4, 2, 0), tables={})
    assert [switch.k_at(b) for b in (1, 4, 5, 16, 17, 10_000)] == [4, 4, 2, 2, 0, 0]


@pytest.fixture(scope="module")
def auto_answer():
    from typer.testing import CliRunner

    result = CliRunner().invoke(
        app, [*README_DEPLOYMENT, *SLA, *QUICK, "--k-schedule", "auto", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_auto_serves_at_least_the_best_static_k_on_the_readme_deployment(runner, auto_answer):
    static = runner.invoke(app, [*README_DEPLOYMENT, *SLA, *QUICK, "--draft-k", "auto", "--json"])
    best_static = json.loads(static.stdout)["max_request_rate"]["speculative"]
    served = auto_answer["max_request_rate"]
    assert served["speculative"] >= best_static
    assert served["speculative"] >= served["baseline"]  # and K = 0's
    table = auto_answer["k_schedule"]
    assert table["source"] == "auto"
    assert table["max_request_rate"]["static"] == best_static
    assert set(table["max_request_rate"]) == {"schedule", "static"}
    assert table["serves"] in ("schedule", "static")


def test_a_file_written_by_schedule_is_served_as_written(runner, tmp_path):
    config = tmp_path / "spec.json"
    config.write_text(
        json.dumps(
            {
                "method": "draft_model",
                "num_speculative_tokens": 3,
                "num_speculative_tokens_per_batch_size": [[1, 8, 3], [12, 64, 2], [65, 1024, 0]],
            }
        )
    )
    # the gap 9-11 inherits the K before it, and past 1,024 the last K runs on
    assert read_k_schedule(config) == ((1, 11, 3), (12, 64, 2), (65, BEYOND, 0))
    result = runner.invoke(
        app, [*README_DEPLOYMENT, *SLA, *QUICK, "--k-schedule", str(config), "--json"]
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["k_schedule"]["serves"] == "schedule"
    assert data["speculative"]["draft_k"] == 3  # the largest K sizes the lookahead
    assert data["k_schedule"]["table"][-1] == [65, None, 0]


def test_tensorrt_llm_and_schedule_json_forms(tmp_path):
    trtllm = tmp_path / "extra.yaml"
    trtllm.write_text(
        "speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 4\n"
        "  draft_len_schedule:\n    4: 4\n    32: 2\n"
    )
    # keys are inclusive upper bounds; past the largest, no drafts
    assert read_k_schedule(trtllm) == ((1, 4, 4), (5, 32, 2), (33, BEYOND, 0))
    buckets = tmp_path / "schedule.json"
    buckets.write_text(
        json.dumps(
            {
                "buckets": [
                    {"min_batch": 1, "max_batch": 27, "draft_k": 3},
                    {"min_batch": 28, "max_batch": 1024, "draft_k": 2},
                ]
            }
        )
    )
    assert read_k_schedule(buckets) == ((1, 27, 3), (28, BEYOND, 2))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--k-schedule", "auto"], "--k-schedule compares capacities at the SLA: give --sla"),
        (
            [*SLA, "--k-schedule", "auto", "--tp", "auto"],
            "--k-schedule serves one layout: give --tp N, not auto",
        ),
    ],
)
def test_k_schedule_mistakes_are_one_line_and_exit_2(runner, extra, message):
    result = runner.invoke(app, [*README_DEPLOYMENT, *extra])
    assert result.exit_code == 2
    assert result.stderr == f"error: {message}\n"


def test_a_file_without_a_table_is_one_line(runner, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"method": "eagle3"}')
    result = runner.invoke(app, [*README_DEPLOYMENT, *SLA, "--k-schedule", str(bad)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {bad}: holds no K schedule: vLLM's speculative_config, TensorRT-LLM's "
        "speculative_config or the JSON of 'infersize schedule'\n"
    )
