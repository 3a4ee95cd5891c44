"""`infersize schedule` on the command line: every mistake is one line and exit 2, the JSON
keeps its keys, SGLang gets the flags it takes, --out replaces only a file infersize wrote (as
the sweep writer keeps a user's files: docs/reliability.md), and the command starts light."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from infersize.cli import app
from tests.support.figures import png_size

EIGHT_B = ["schedule", "--target", "llama-3.1-8b", "--method", "eagle3", "--gpu", "h100"]
SEVENTY_B = [
    "schedule",
    "--target",
    "llama-3.1-70b",
    "--target-quant",
    "fp8",
    "--draft",
    "llama-3.2-1b",
    "--gpu",
    "h100",
    "--tp",
    "2",
    "--context-length",
    "1024",
]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-batch", "0"], "--max-batch must be in 1..65536, got 0"),
        (
            ["--max-batch", "5000"],
            "--max-batch (5000) is more than engine vllm runs at once "
            "(1024 sequences, its --max-num-seqs): raise that instead",
        ),
        (
            ["--engine", "foo"],
            "unknown engine 'foo': choose plain, vllm, vllm-0.15, llama.cpp, "
            "sglang, sglang-0.4, sglang-0.5.9, trtllm",
        ),
        (
            ["--engine", "llama.cpp"],
            "--engine llama.cpp has no draft length to set per batch "
            "size: choose vllm, trtllm or sglang",
        ),
        (
            ["--engine", "vllm-0.15"],
            "--engine vllm-0.15 (vLLM 0.15.0 rules) predates vLLM's "
            "draft length per batch size (https://github.com/vllm-project/vllm/pull/32374): "
            "choose vllm",
        ),
        (
            ["--engine", "sglang", "--max-batch", "49"],
            "--max-batch (49) is more than engine "
            "sglang runs at once (48 sequences, its --max-running-requests): raise that instead",
        ),
    ],
    ids=[
        "max-batch-0",
        "max-batch-past-engine",
        "unknown-engine",
        "llama.cpp",
        "vllm-0.15",
        "sglang-48",
    ],
)
def test_a_mistake_is_one_line_and_exit_2(runner, args, message):
    result = runner.invoke(app, [*EIGHT_B, *args])
    assert result.exit_code == 2
    assert result.stderr == f"error: {message}\n"


def test_a_schedule_needs_a_drafter(runner):
    base = ["schedule", "--target", "llama-3.1-8b", "--gpu", "h100"]
    result = runner.invoke(app, [*base, "--draft", "none"])
    assert (result.exit_code, result.stderr) == (
        2,
        "error: --draft none runs the target alone: a schedule needs a drafter\n",
    )
    result = runner.invoke(app, base)
    assert result.stderr == (
        "error: missing option '--draft' (a draft model, a head, or none; or give --method)\n"
    )
    medusa = [
        "schedule",
        "--target",
        "vicuna-7b-v1.3",
        "--draft",
        "medusa-vicuna-7b-v1.3",
        "--gpu",
        "h100",
        "--acceptance-rate",
        "0.6",
        "--engine",
        "trtllm",
    ]
    result = runner.invoke(app, medusa)
    assert result.stderr == (
        "error: --engine trtllm: TensorRT-LLM's PyTorch backend has no medusa drafter; choose "
        "vllm, which has\n"
    )


def test_the_json_keeps_its_keys(runner):
    result = runner.invoke(app, [*SEVENTY_B, "--engine", "trtllm", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data) == ["engine", "buckets", "config", "notes"]
    assert data["engine"] == "trtllm"
    keys = [
        "min_batch",
        "max_batch",
        "draft_k",
        "tpot_ms",
        "output_tokens_per_s",
        "speedup",
        "static_best_k",
        "static_best_speedup",
    ]
    assert all(list(b) == keys for b in data["buckets"])
    assert [b["draft_k"] for b in data["buckets"]] == [4, 3, 2]
    assert data["config"]["speculative_config"]["draft_len_schedule"] == {
        "3": 4,
        "48": 3,
        "2048": 2,
    }


def test_sglang_prints_the_flags_of_the_static_k(runner):
    result = runner.invoke(app, [*EIGHT_B, "--engine", "sglang"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index(
        "SGLang, one K for every batch: python -m sglang.launch_server --model-path MODEL with "
        "(--out FILE writes them)"
    )
    answer = json.loads(runner.invoke(app, [*EIGHT_B, "--engine", "sglang", "--json"]).stdout)
    k = answer["buckets"][0]["static_best_k"]  # the flags run the one static K
    assert lines[at + 1] == (
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path "
        f"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B --speculative-num-steps {k} "
        f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}"
    )


def test_out_replaces_only_a_file_infersize_wrote(runner, tmp_path):
    out = tmp_path / "spec.yaml"
    args = [*SEVENTY_B, "--engine", "trtllm", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    written = out.read_text()
    assert written.startswith("# TensorRT-LLM LLM-API options written by infersize schedule")
    # its own file, even from another engine's run: replaced in one rename
    again = runner.invoke(app, [*SEVENTY_B, "--engine", "vllm", "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads(out.read_text())["method"] == "draft_model"
    # a file of the user's, even one that holds a configuration: refused, kept byte for byte
    users = (
        '{\n  "method": "draft_model",\n  "num_speculative_tokens": 2\n}\n',  # laid out by hand
        '{"method": "eagle3", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}\n',
        written + "# tuned by hand\n",
        "max_num_seqs: 256\n",
    )
    for mine in users:
        out.write_text(mine)
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        assert result.stderr == (
            f"error: {out}: exists and is not a configuration infersize wrote; remove it or "
            "choose another --out\n"
        )
        assert out.read_text() == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # no temp file left


def test_out_never_writes_through_a_link_or_onto_a_folder(runner, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("precious\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    (tmp_path / "folder").mkdir()
    for out in (link, tmp_path / "folder"):
        result = runner.invoke(app, [*EIGHT_B, "--out", str(out)])
        assert result.exit_code == 2
        assert result.stderr == (f"error: {out}: is not a regular file; choose another --out\n")
    assert target.read_text() == "precious\n" and link.is_symlink()


def test_plot_draws_k_and_speedup_against_batch(runner, tmp_path):
    out = tmp_path / "schedule.png"
    result = runner.invoke(app, [*SEVENTY_B, "--engine", "trtllm", "--plot", str(out), "--json"])
    assert result.exit_code == 0, result.output
    width, height = png_size(out)
    assert 800 <= width <= 2000 and 700 <= height <= 1600, (width, height)


def test_schedule_start_up_imports_no_heavy_modules():
    """Like spec: no polars, joblib, scipy or pyarrow on the command's path."""
    code = (
        "import sys\nfrom infersize.cli import app\n"
        f"try:\n    app({[*EIGHT_B, '--json']!r})\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('polars', 'joblib', 'loky', 'scipy', 'pyarrow')\n"
        "         if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=os.environ.copy(),
    )
    assert "HEAVY []" in done.stderr, done.stderr


def test_a_deployment_that_does_not_fit_is_an_answer_with_nothing_to_write(runner, tmp_path):
    """Llama-3.1-70B in bf16 holds 131 GiB of weights: not on one 80 GB H100, at any batch."""
    args = ["schedule", "--target", "llama-3.1-70b", "--draft", "llama-3.2-1b", "--gpu", "h100"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["buckets"], data["config"]) == ([], None)
    assert data["notes"][-1] == (
        "batch 1 does not fit in memory at context 4,096 at any K: nothing to schedule"
    )
    out = tmp_path / "spec.json"
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {out}: nothing written, nothing fits to schedule\n"
    assert not out.exists()


def test_max_k_names_no_flag_the_command_lacks(runner):
    result = runner.invoke(app, [*EIGHT_B, "--max-k", "0"])
    assert (result.exit_code, result.stderr) == (2, "error: --max-k must be at least 1, got 0\n")
