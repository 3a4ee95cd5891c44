"""The bad-input matrix: every command and every kind of user input (names, numbers at and past
their bounds, NaN and inf, empty and huge values, wrong types, misspelt YAML keys, YAML that is
not a mapping, binary and missing files, unwritable folders) ends with exit code 2 and one line
on stderr naming the problem, never a traceback."""

from __future__ import annotations

import pytest

from infersize.cli import app
from tests.support.commands import SEED_ARGS

GOOD_SWEEP = """\
targets: [qwen2.5-7b]
drafts: [qwen2.5-0.5b]
gpus: [h100]
context_lengths: [4096]
acceptance_rates: [0.7]
"""


def spec_with(**changes: str) -> list[str]:
    argv = list(SEED_ARGS)
    for flag, value in changes.items():
        flag = "--" + flag.replace("_", "-")
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return argv


SPEC = [
    (spec_with(target="qwen9-999b"), "unknown model 'qwen9-999b'"),
    (spec_with(target=""), "unknown model ''"),
    (spec_with(target="./no/such/folder"), "no/such/folder: no such folder"),
    (spec_with(target="missing.gguf"), "missing.gguf: no such file"),
    (spec_with(draft="llama-3.2-1b"), "add --allow-cross-tokenizer"),
    (spec_with(gpu="h1000"), "unknown gpu 'h1000'"),
    (spec_with(target_quant="int3"), "unknown precision 'int3'"),
    (spec_with(kv_dtype="fp7"), "unknown kv dtype 'fp7'"),
    (spec_with(engine="trt"), "unknown engine 'trt'"),
    (
        spec_with(speedup_model="magic"),
        "unknown speedup model 'magic': choose leviathan, roofline, linear",
    ),
    (spec_with(acceptance_rate="-0.1"), "--acceptance-rate must be in [0, 1]"),
    (spec_with(acceptance_rate="1.5"), "--acceptance-rate must be in [0, 1]"),
    (spec_with(acceptance_rate="nan"), "--acceptance-rate must be a finite number"),
    (spec_with(acceptance_rate="inf"), "--acceptance-rate must be a finite number"),
    (spec_with(acceptance_rate="abc"), "Invalid value for '--acceptance-rate'"),
    (spec_with(acceptance_rate=""), "Invalid value for '--acceptance-rate'"),
    (spec_with(draft_k="0"), "--draft-k must be at least 1"),
    (spec_with(draft_k="-1"), "--draft-k must be at least 1"),
    (spec_with(draft_k="x"), "Invalid value for '--draft-k'"),
    (spec_with(draft_k="1.5"), "Invalid value for '--draft-k'"),
    (spec_with(draft_k="1000000"), "--max-k (16) must be at least --draft-k (1000000)"),
    (spec_with(max_k="100000"), "--max-k must be at most 256"),
    (spec_with(context_length="0"), "--context-length must be at least 1"),
    (spec_with(context_length="-5"), "--context-length must be at least 1"),
    (spec_with(context_length="big"), "Invalid value for '--context-length'"),
    (spec_with(batch_size="0"), "--batch-size must be at least 1"),
    (spec_with(latency_ratio="0"), "--latency-ratio must be in [0.01, 1e6]"),
    (spec_with(latency_ratio="-1"), "--latency-ratio must be in [0.01, 1e6]"),
    (spec_with(latency_ratio="nan"), "--latency-ratio must be a finite number"),
    (spec_with(latency_ratio="inf"), "--latency-ratio must be a finite number"),
    (spec_with(tp="0"), "--tp must be at least 1"),
    (spec_with(tp="3"), "tensor parallel 3 does not divide"),
    (spec_with(tp="-2"), "--tp must be at least 1"),
    (spec_with(engine="vllm", gpu_memory_utilization="0"), "--gpu-memory-utilization must be"),
    (spec_with(engine="vllm", gpu_memory_utilization="1.5"), "--gpu-memory-utilization must be"),
    (spec_with(engine="vllm", gpu_memory_utilization="nan"), "--gpu-memory-utilization must be"),
    (spec_with(overhead_gib="-1"), "--overhead-gib must be in [0, 1024] GiB"),
    (spec_with(overhead_gib="nan"), "--overhead-gib must be in [0, 1024] GiB"),
    (spec_with(overhead_gib="inf"), "--overhead-gib must be in [0, 1024] GiB"),
    (spec_with(price_usd_per_hour="-1"), "--price-usd-per-hour must be in [0, 1e+06] $ per"),
    (spec_with(price_usd_per_hour="nan"), "--price-usd-per-hour must be in [0, 1e+06] $ per"),
    (spec_with(units="mb"), "--units must be gib or gb"),
    (spec_with(plot="{tmp}/figure.jpg"), "the figure file must end in .png or .svg"),
    (spec_with(catalog="{tmp}/missing.yaml"), "missing.yaml: no such file"),
    (spec_with(catalog="{tmp}/binary.yaml"), "not a text file"),
    (spec_with(catalog="{tmp}/list.yaml"), "expected a mapping"),
    (spec_with(catalog="{tmp}/misspelt.yaml"), "key 'gpus.0.memory_byte': unknown key"),
    (spec_with(catalog="{tmp}/evil.yaml"), "invalid YAML"),
    (["spec", "--draft", "none", "--gpu", "a100"], "Missing option '--target'"),
    (["spec", *SEED_ARGS[1:], "--no-such-flag"], "No such option: --no-such-flag"),
]
OTHER = [
    (["alpha", "--mean-accepted-tokens", "7", "--draft-k", "4"], "must be in [1, 5]"),
    (["alpha", "--mean-accepted-tokens", "nan", "--draft-k", "4"], "must be in [1, 5]"),
    (["alpha", "--vllm-acceptance-rate", "2", "--draft-k", "4"], "must be in [0, 1]"),
    (["alpha", "--system-efficiency", "0", "--draft-k", "4"], "must be in [0.2, 1]"),
    (["alpha", "--draft-k", "4"], "give exactly one of"),
    (["alpha", "--acceptance-rate", "0.5", "--draft-k", "0"], "--draft-k must be at least 1"),
    (["models", "show", "qwen9"], "unknown model 'qwen9'"),
    (["gpus", "show", "h1000"], "unknown gpu 'h1000'"),
    (["sweep", "validate", "{tmp}/missing.yaml"], "no such file"),
    (["sweep", "validate", "{tmp}/binary.yaml"], "not a text file"),
    (["sweep", "validate", "{tmp}"], "is a directory"),
    (["sweep", "validate", "{tmp}/list.yaml"], "expected a mapping of sweep keys"),
    (["sweep", "validate", "{tmp}/evil.yaml"], "invalid YAML"),
    (["sweep", "validate", "{tmp}/bigk.yaml"], "K must be at most 256"),
    (["sweep", "validate", "{tmp}/huge.yaml"], "over the limit of 100,000,000"),
    (["sweep", "validate", "{tmp}/toolong.yaml"], "range has more than 100,000 values"),
    (
        ["sweep", "run", "{tmp}/good.yaml", "--out", "{tmp}/file.txt/out"],
        "cannot create it (Not a directory)",
    ),
    (["sweep", "run", "{tmp}/good.yaml", "--jobs", "0"], "--jobs must be at least 1"),
    (["sweep", "run", "{tmp}/good.yaml", "--backend", "spark"], "--backend must be loky or dask"),
    (["best", "{tmp}/nowhere"], "no best_pairs.parquet there"),
    (
        ["sweep", "run", "{tmp}/good.yaml", "--scheduler", "tcp://127.0.0.1:1"],
        "--scheduler needs --backend dask",
    ),
    (["report", "{tmp}/nowhere"], "no manifest.json there"),
    (
        ["plot", "frontier", "{tmp}/nowhere", "--gpu", "h100", "--out", "{tmp}/f.png"],
        "no best_pairs.parquet there",
    ),
    (
        ["plot", "k", "--alpha", "1.5", "--latency-ratio", "10", "--out", "{tmp}/k.png"],
        "--alpha values must be in [0, 1]",
    ),
    (
        ["plot", "k", "--alpha", "0.5", "--latency-ratio", "nan", "--out", "{tmp}/k.png"],
        "--latency-ratio must be a finite number > 0",
    ),
    (
        ["plot", "k", "--alpha", "0.5", "--latency-ratio", "5", "--out", "{tmp}/no/dir/k.png"],
        "no such folder",
    ),
    (
        [
            "plot",
            "batch",
            "--target",
            "qwen2.5-7b",
            "--draft",
            "qwen2.5-0.5b",
            "--gpu",
            "a100",
            "--acceptance-rate",
            "2",
            "--out",
            "{tmp}/b.png",
        ],
        "--acceptance-rate must be in [0, 1]",
    ),
    (["bench", "--loop-cells", "0"], "--loop-cells must be at least 1"),
]
CASES = SPEC + OTHER


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "binary.yaml").write_bytes(b"\x00\xff\xfe\x01\x02")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "misspelt.yaml").write_text("gpus:\n  - id: x\n    name: X\n    memory_byte: 1\n")
    # an object-constructing tag: the safe loader must refuse it, never run it
    (tmp / "evil.yaml").write_text("gpus: !!python/object/apply:os.system ['echo pwned']\n")
    (tmp / "good.yaml").write_text(GOOD_SWEEP)
    (tmp / "bigk.yaml").write_text(GOOD_SWEEP + "draft_k: {start: 1, stop: 1000, step: 1}\n")
    huge = GOOD_SWEEP.replace("[0.7]", "{start: 0, stop: 1, step: 0.0001}")
    (tmp / "huge.yaml").write_text(huge + "batch_sizes: {start: 1, stop: 5000, step: 1}\n")
    toolong = GOOD_SWEEP.replace("[0.7]", "{start: 0, stop: 1, step: 0.000001}")
    (tmp / "toolong.yaml").write_text(toolong)
    (tmp / "file.txt").write_text("x")
    return tmp


@pytest.mark.parametrize(
    ("args", "message"), CASES, ids=[f"{i:02d}-{' '.join(a[:2])}" for i, (a, _) in enumerate(CASES)]
)
def test_bad_input_exits_2_with_one_line(runner, files, args, message):
    argv = [a.replace("{tmp}", str(files)) for a in args]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_the_matrix_is_wide(files):
    assert len(CASES) >= 75
    assert not (files / "pwned").exists()
