"""`infersize capacity` from the command line: the JSON contract, the panel, trace replay from
CSV, JSON Lines and Parquet files written here, and every mistake as one line with exit code 2."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from infersize.cli import app

BASE = [
    "capacity",
    "--target",
    "llama-3.1-8b",
    "--draft",
    "llama-3.2-1b",
    "--gpu",
    "h100",
    "--engine",
    "vllm",
    "--acceptance-rate",
    "0.7",
    "--draft-k",
    "3",
    "--requests",
    "300",
]
LOAD = ["--input-tokens", "512", "--output-tokens", "128", "--request-rate", "2"]
SLA = ["--sla", "ttft:p99<=2000ms;tpot:p99<=20ms", "--target-request-rate", "40"]
ARM_KEYS = (
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_latency_s",
    "output_tokens_per_s",
    "requests_per_s",
    "mean_running_sequences",
    "preemptions",
    "draft_k",
)
STATISTICS = ("mean", "p50", "p90", "p95", "p99")


def run_json(runner, *args):
    result = runner.invoke(app, [*BASE, *args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_the_json_contract(runner):
    data = run_json(runner, *LOAD, *SLA)
    for arm in ("baseline", "speculative"):
        assert all(key in data[arm] for key in ARM_KEYS)
        for key in ARM_KEYS[:4]:
            stats = data[arm][key]
            assert list(stats) == list(STATISTICS)
            assert stats["p50"] <= stats["p90"] <= stats["p95"] <= stats["p99"]
    assert data["baseline"]["draft_k"] == 0 and data["speculative"]["draft_k"] == 3
    for key in ("max_request_rate", "replicas", "gpus"):
        assert set(data[key]) == {"baseline", "speculative"}
    assert data["gpus"]["baseline"] == data["replicas"]["baseline"] * 1  # TP 1
    saved = data["gpus"]["baseline"] - data["gpus"]["speculative"]
    assert data["speculation_saves_gpus"] == saved
    assert data["workload"]["arrival"] == "poisson" and data["workload"]["requests"] == 300
    assert data["sla"] == "ttft:p99<=2s;tpot:p99<=20ms"
    assert data["engine"] == "vllm" and data["notes"]
    assert data["draft_fits"] is True


def test_the_same_seed_gives_the_same_json(runner):
    first = runner.invoke(app, [*BASE, *LOAD, *SLA, "--json", "--seed", "3"]).stdout
    assert first == runner.invoke(app, [*BASE, *LOAD, *SLA, "--json", "--seed", "3"]).stdout
    assert first != runner.invoke(app, [*BASE, *LOAD, *SLA, "--json", "--seed", "4"]).stdout


def test_the_panel_prints_both_arms_and_says_whether_speculation_pays(runner):
    result = runner.invoke(app, [*BASE, *LOAD, *SLA])
    assert result.exit_code == 0, result.stderr
    assert "baseline (K=0)" in result.stdout and "speculative (K=3)" in result.stdout
    assert "max requests/s per replica" in result.stdout
    verdicts = ("speculation pays", "speculation cuts latency but costs capacity")
    assert any(v in result.stdout for v in verdicts)


@pytest.mark.parametrize(
    ("engine", "knobs", "rules"),
    [
        (
            "vllm",
            [],
            "scheduled by vLLM V1's rules: chunked prefill within max_num_batched_tokens 8,192, "
            "at most 1,024 sequences (the defaults of `vllm serve` for this GPU unless set); "
            "prompts' chunks run beside the decodes; a request is admitted when its first chunk "
            "fits, and a full KV pool preempts the latest admitted, which recomputes",
        ),
        (
            "sglang",
            [],
            "scheduled by SGLang's rules: chunked_prefill_size 8,192 tokens a step, at most "
            "2,048 running requests (SGLang's defaults unless set), schedule policy fcfs "
            "(arrival order); prompts run in prefill steps of their own while the decodes wait; "
            "a request is admitted when its first chunk fits, and a full KV pool preempts the "
            "latest admitted, which recomputes",
        ),
        (
            "sglang",
            ["--enable-mixed-chunk"],
            "scheduled by SGLang's rules: chunked_prefill_size 8,192 tokens a step, at most "
            "2,048 running requests (SGLang's defaults unless set), schedule policy fcfs "
            "(arrival order); prompts' chunks run beside the decodes; a request is admitted when "
            "its first chunk fits, and a full KV pool preempts the latest admitted, which "
            "recomputes",
        ),
        (
            "trtllm",
            [],
            "scheduled by TensorRT-LLM's rules: max_num_tokens 8,192 tokens a step, at most "
            "2,048 sequences (max_batch_size), waiting requests in arrival order; prompts run "
            "beside the decodes in one step (in-flight batching); a request is admitted only "
            "when its whole answer's KV fits beside the running requests', never preempting",
        ),
    ],
)
def test_the_scheduling_note_says_the_engines_own_rules(runner, engine, knobs, rules):
    """SGLang runs prompts in prefill steps of their own unless --enable-mixed-chunk
    (get_new_batch_prefill), TensorRT-LLM admits a request only when its whole answer fits
    (GUARANTEED_NO_EVICT): the note says the rules the simulator applied, not vLLM's."""
    args = ["capacity", "--target", "llama-3.1-8b", "--draft", "none", "--gpu", "h100"]
    args += ["--engine", engine, *knobs, *LOAD, "--requests", "200", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert rules in json.loads(result.stdout)["notes"]


def test_an_sla_one_request_breaks_is_an_answer(runner):
    data = run_json(runner, *LOAD, "--sla", "ttft:p99<=1ms", "--target-request-rate", "10")
    assert data["max_request_rate"] == {"baseline": 0.0, "speculative": 0.0}
    assert data["replicas"] == {"baseline": None, "speculative": None}
    assert data["baseline"]["max_request_rate_why"].startswith(
        "one request alone already breaks the SLA (ttft:p99 "
    )


def test_a_closed_loop_load(runner):
    data = run_json(runner, "--input-tokens", "512", "--output-tokens", "128", "--concurrency", "8")
    assert data["workload"]["concurrency"] == 8
    assert 4 < data["baseline"]["mean_running_sequences"] <= 8
    assert data["max_request_rate"] is None and data["gpus"] is None


def test_draft_k_auto_reports_the_k_it_chose(runner):
    data = run_json(runner, *LOAD, "--draft-k", "auto", "--max-k", "6")
    assert 0 <= data["speculative"]["draft_k"] <= 6
    assert any(note.startswith("--draft-k auto: ") for note in data["notes"])


def test_draft_k_auto_searches_up_to_a_max_k_below_the_default_k(runner):
    """--max-k 2 bounds the search even though the default K (4) is larger."""
    data = run_json(runner, *LOAD, "--draft-k", "auto", "--max-k", "2")
    assert 0 <= data["speculative"]["draft_k"] <= 2
    assert any("screened K = 1..2;" in note for note in data["notes"]), data["notes"]


def test_a_draft_that_leaves_no_kv_room_at_any_k_is_plain_decoding(runner):
    """Llama-3.3-70B in FP8 (about 70 GB of weights) on one 80 GB A100 keeps a small KV pool;
    its EAGLE-3 head's weights and KV leave none at any K: auto answers K = 0 and says why."""
    args = [
        "capacity",
        "--target",
        "llama-3.3-70b",
        "--target-quant",
        "fp8",
        "--method",
        "eagle3",
        "--gpu",
        "a100",
        "--engine",
        "vllm",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "256",
        "--request-rate",
        "0.1",
        "--sla",
        "ttft:p99<=5s;tpot:p99<=100ms",
        "--draft-k",
        "auto",
        "--max-k",
        "3",
        "--requests",
        "100",
    ]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["draft_fits"] is False and data["speculative"]["draft_k"] == 0
    assert data["max_request_rate"]["speculative"] == data["max_request_rate"]["baseline"] > 0
    panel = runner.invoke(app, args).stdout
    assert "the draft leaves no room for a KV cache at any K: plain decoding (K = 0)" in panel
    fixed = runner.invoke(app, [*args[:-6], "--draft-k", "2"])
    assert fixed.exit_code == 2
    assert "llama-3.3-70b + eagle3-llama3.3-70b (fp8) leaves no room for a KV cache" in (
        fixed.stderr
    )


def _trace(tmp_path, kind):
    inputs, outputs = [300, 700, 512], [64, 200, 128]
    path = tmp_path / f"trace.{kind}"
    if kind == "csv":
        path.write_text(
            "input_tokens,output_tokens,source\n"
            + "".join(f"{i},{o},x\n" for i, o in zip(inputs, outputs, strict=True))
        )
    elif kind == "jsonl":
        path.write_text(
            "".join(
                json.dumps({"input_tokens": i, "output_tokens": o}) + "\n"
                for i, o in zip(inputs, outputs, strict=True)
            )
        )
    else:
        pq.write_table(pa.table({"input_tokens": inputs, "output_tokens": outputs}), path)
    return path


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_a_trace_is_replayed_in_its_order(runner, tmp_path, kind):
    path = _trace(tmp_path, kind)
    data = run_json(runner, "--lengths", str(path), "--request-rate", "2")
    assert data["workload"]["lengths_file"] == str(path)
    # 300 requests replay the three rows a hundred times each
    assert data["workload"]["input_tokens"] == pytest.approx((300 + 700 + 512) / 3)
    assert data["workload"]["output_tokens"] == pytest.approx((64 + 200 + 128) / 3)


def test_capacity_plot_writes_a_figure(runner, tmp_path):
    out = tmp_path / "capacity.png"
    result = runner.invoke(app, [*BASE, *LOAD, *SLA, "--requests", "200", "--plot", str(out)])
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes().startswith(b"\x89PNG")


MISTAKES = [
    (
        ["--sla", "ttft:p100<=2s"],
        "--sla has an unknown statistic 'p100': choose mean, p50, p90, p95, p99",
    ),
    (["--sla", "foo:p99<=2s"], "--sla has an unknown metric 'foo': choose ttft, tpot, itl, e2e"),
    (["--sla", "ttft:p99<=2"], "--sla term 'ttft:p99<=2' needs a unit: ms or s"),
    (
        ["--sla", "ttft:p99<=2s;;tpot:p99<=1s"],
        "--sla has an empty term in 'ttft:p99<=2s;;tpot:p99<=1s'",
    ),
    (["--sla", "ttft:p99<=2s;ttft:p50<=1s"], "--sla gives ttft twice"),
    (
        ["--request-rate", "-1"],
        "--request-rate must be a number of requests/s in [1e-06, 1e+06], got -1",
    ),
    (
        ["--request-rate", "5e-324"],
        "--request-rate must be a number of requests/s in [1e-06, 1e+06], got 4.94066e-324",
    ),
    (["--seed", "-1"], "--seed must be in 0..4,294,967,295, got -1"),
    (
        ["--arrival", "gamma:1e-300"],
        "--arrival gamma's coefficient of variation must be in [0.01, 100], got '1e-300'",
    ),
    (
        ["--output-tokens", "1", "--sla", "tpot:p99<=50ms"],
        "--sla term 'tpot:p99<=50ms' limits the time between tokens, but every answer is one "
        "token: no request has one (answers need at least 2 tokens, --output-tokens)",
    ),
    (
        ["--concurrency", "4"],
        "--request-rate or --concurrency sets the load: give one of them, not both",
    ),
    (
        ["--arrival", "gamma"],
        "--arrival must be poisson, constant or gamma:CV (e.g. gamma:2), got 'gamma'",
    ),
    (
        ["--arrival", "gamma:-1"],
        "--arrival gamma's coefficient of variation must be in [0.01, 100], got '-1'",
    ),
    (["--draft-k", "x"], "--draft-k takes a number of draft tokens or auto, got 'x'"),
    (["--headroom", "0.5"], "--headroom must be in [1, 1000], got 0.5"),
    (["--headroom", "1e308"], "--headroom must be in [1, 1000], got 1e+308"),
    (["--requests", "0"], "--requests must be in 1..1,000,000, got 0"),
    (
        ["--target-request-rate", "-3", "--sla", "ttft:p99<=2s"],
        "--target-request-rate must be a number of requests/s in [1e-06, 1e+09], got -3",
    ),
    (
        ["--target-request-rate", "20"],
        "--target-request-rate needs --sla: the latency target decides what one replica serves, "
        "and so how many it takes",
    ),
    (["--tp", "two"], "--tp takes a number of GPUs or auto, got 'two'"),
    (["--tp", "0"], "--tp must be at least 1 (or auto), got 0"),
    (["--replications", "0"], "--replications must be in 1..30, got 0"),
    (["--workload-kind", "chatt"], "unknown workload kind 'chatt': did you mean 'chat'?"),
    (["--replications", "31"], "--replications must be in 1..30, got 31"),
    (["--acceptance-length", "9"], "--acceptance-length is measured at one K"),
]


@pytest.mark.parametrize(("extra", "message"), MISTAKES, ids=[m[1][:40] for m in MISTAKES])
def test_mistakes_are_one_line_and_exit_2(runner, extra, message):
    args = [*BASE, *LOAD, *extra]
    if "--concurrency" in extra:
        args = [
            *BASE,
            "--input-tokens",
            "512",
            "--output-tokens",
            "128",
            "--request-rate",
            "2",
            *extra,
        ]
    if "--acceptance-length" in extra:
        args = [a if a != "3" else "auto" for a in args]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {message}")
    assert result.stderr.count("\n") == 1


def _without_alpha(args: list[str]) -> list[str]:
    at = args.index("--acceptance-rate")
    return args[:at] + args[at + 2 :]


def test_an_acceptance_length_outside_one_to_k_plus_one_is_refused(runner):
    result = runner.invoke(app, [*_without_alpha(BASE), *LOAD, "--acceptance-length", "9"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --acceptance-length must be in [1, 4] at --draft-k 3 (1 + accepted drafts per "
        "step), got 9\n"
    )


def test_an_acceptance_length_with_an_acceptance_rate_is_refused(runner):
    result = runner.invoke(app, [*BASE, *LOAD, "--acceptance-length", "2.5"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --acceptance-length cannot be given with --acceptance-rate or "
        "--acceptance-rates: one of the three\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("input_tokens\n5\n", "missing column(s) output_tokens"),
        (
            "input_tokens,output_tokens\n5,-3\n",
            "row 1: output_tokens must be a whole number in 1..10,000,000, got -3",
        ),
        (
            "input_tokens,output_tokens\n5,0\n",
            "row 1: output_tokens must be a whole number in 1..10,000,000, got 0",
        ),
        ("input_tokens,output_tokens\n", "no rows"),
    ],
)
def test_a_bad_lengths_file_is_one_line(runner, tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    args = [*BASE, "--lengths", str(path), "--request-rate", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}: {message}\n"


def test_output_tokens_zero_and_missing_lengths(runner):
    zero = runner.invoke(
        app, [*BASE, "--input-tokens", "5", "--output-tokens", "0", "--request-rate", "1"]
    )
    assert zero.exit_code == 2
    assert zero.stderr == "error: --output-tokens must be at least 1, got 0\n"
    none = runner.invoke(app, [*BASE, "--request-rate", "1"])
    assert none.stderr == (
        "error: the workload needs --input-tokens and --output-tokens (or --lengths FILE)\n"
    )
