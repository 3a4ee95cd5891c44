"""What `infersize schedule` emits is what each engine's own source accepts and reads back as
the K infersize priced: the rules are written here as small validators, from the upstream files
and commits cited beside each (the engines are not installed), and every emitted table is run
through them on deployments whose schedules have several ranges."""

from __future__ import annotations

import bisect
import itertools
import json
from pathlib import Path

import pytest
import yaml

from infersize.cli import app

# vllm-project/vllm@002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443:vllm/config/speculative.py,
# class SpeculativeConfig: its fields (the same field text as the merge of
# https://github.com/vllm-project/vllm/pull/32374 and as vllm-project/vllm@48ebd6f2, lines 178-183)
VLLM_SPECULATIVE_CONFIG_FIELDS = {
    "enforce_eager",
    "num_speculative_tokens",
    "model",
    "method",
    "draft_tensor_parallel_size",
    "tensor_parallel_size",
    "quantization",
    "moe_backend",
    "attention_backend",
    "kv_cache_dtype",
    "max_model_len",
    "revision",
    "code_revision",
    "index_share_for_mtp_iteration",
    "disable_padded_drafter_batch",
    "disable_eagle_block_drop",
    "use_local_argmax_reduction",
    "use_heterogeneous_vocab",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "parallel_drafting",
    "target_model_config",
    "target_parallel_config",
    "num_speculative_tokens_per_batch_size",
    "draft_model_config",
    "draft_parallel_config",
    "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
    "draft_load_config",
    "rejection_sample_method",
    "synthetic_acceptance_rates",
    "synthetic_acceptance_length",
    "enable_adaptive_verification",
    "draft_sample_method",
    "dspark_draft_topk",
}
# the same file: SpeculativeMethod's literals that infersize's methods map to
VLLM_METHODS = {"ngram", "medusa", "mlp_speculator", "draft_model", "eagle", "eagle3", "mtp"}


def vllm_dense_schedule(config: dict, max_num_seqs: int) -> list[int]:
    """The K vLLM runs at each batch 1..max_num_seqs (index 0 unused), by the rules of
    vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d:vllm/v1/spec_decode/dynamic/utils.py
    (validate_and_normalize_dynamic_sd_schedule, build_dynamic_sd_schedule_lookup), restated:
    a non-empty list of 3-item entries cast to int; start and end positive, start <= end,
    K >= 0; sorted by start, each start after the previous end; the first start 1;
    num_speculative_tokens and max_num_seqs positive; each range runs min(num_speculative_tokens,
    K), a gap and the batches past the last range the K before them."""
    table = config["num_speculative_tokens_per_batch_size"]
    top = config["num_speculative_tokens"]
    assert isinstance(table, list) and table, "a non-empty list"
    assert max_num_seqs > 0 and isinstance(top, int) and top > 0
    entries = []
    for entry in table:
        assert isinstance(entry, list) and len(entry) == 3, entry
        start, end, k = (int(x) for x in entry)
        assert start > 0 and end > 0 and start <= end and k >= 0, entry
        entries.append((start, end, k))
    entries.sort()
    assert entries[0][0] == 1, "the first range starts at 1"
    for (_, end, _), (start, _, _) in itertools.pairwise(entries):
        assert start > end, "ranges sorted and non-overlapping"
    dense = [0] * (max_num_seqs + 1)
    last = None
    for start, end, k in entries:
        if last is not None:
            for bs in range(last[1] + 1, min(start, max_num_seqs + 1)):
                dense[bs] = min(top, last[2])
        for bs in range(start, min(end, max_num_seqs) + 1):
            dense[bs] = min(top, k)
        last = (start, end, k)
    for bs in range(last[1] + 1, max_num_seqs + 1):
        dense[bs] = min(top, last[2])
    return dense


# NVIDIA/TensorRT-LLM@0004396720054fd8e205cbf616f21f0b57c6b412:tensorrt_llm/llmapi/llm_args.py,
# class DecodingBaseConfig(StrictBaseModel): its fields, and the decoding_type literal of the
# subclasses infersize's methods map to (EagleDecodingConfig, Eagle3DecodingConfig,
# NGramDecodingConfig, DraftTargetDecodingConfig, MTPDecodingConfig)
TRTLLM_DECODING_BASE_FIELDS = {
    "max_draft_len",
    "max_total_draft_tokens",
    "speculative_model",
    "max_concurrency",
    "draft_len_schedule",
    "load_format",
    "acceptance_rate_window_size",
    "acceptance_rate_threshold",
    "use_rejection_sampling",
    "allow_advanced_sampling",
    "advanced_sampling_mode",
    "enable_penalty",
}
TRTLLM_DECODING_TYPES = {"Eagle", "Eagle3", "NGram", "Draft_Target", "MTP"}


def trtllm_draft_len(config: dict, batch: int) -> int:
    """The draft length TensorRT-LLM runs at `batch`, after the checks of the same file
    (validate_draft_len_schedule_and_sort: keys >= 1, values >= 0, the smallest key's value
    equal to max_draft_len, none above it; validate_max_concurrency_and_draft_len_schedule_
    mutually_exclusive; Eagle, NGram and Draft_Target need max_draft_len > 0, Eagle and
    Draft_Target a speculative_model), by the lookup of
    NVIDIA/TensorRT-LLM@011d0933dcb5e592f5fa2626beaf42a96324c578:
    tensorrt_llm/_torch/speculative/utils.py get_draft_len_for_batch_size, restated: the first
    key at or above the batch (bisect_left) applies; past the largest key, 0."""
    spec = config["speculative_config"]
    assert set(config) == {"speculative_config"}
    assert set(spec) - {"decoding_type"} <= TRTLLM_DECODING_BASE_FIELDS
    assert spec["decoding_type"] in TRTLLM_DECODING_TYPES
    top = spec["max_draft_len"]
    assert isinstance(top, int) and top > 0
    if spec["decoding_type"] in ("Eagle", "Eagle3", "Draft_Target"):
        assert spec.get("speculative_model")
    schedule = spec.get("draft_len_schedule")
    if schedule is None:
        return top
    assert "max_concurrency" not in spec, "mutually exclusive with draft_len_schedule"
    assert all(isinstance(k, int) and k >= 1 for k in schedule)
    assert all(isinstance(v, int) and 0 <= v <= top for v in schedule.values())
    assert schedule[min(schedule)] == top, "the smallest key maps to max_draft_len"
    keys = sorted(schedule)
    at = bisect.bisect_left(keys, batch)
    return schedule[keys[at]] if at < len(keys) else 0


def test_the_validators_refuse_what_the_engines_refuse():
    table = [[1, 8, 4], [9, 32, 2], [33, 64, 0]]
    good = {"num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": table}
    # by the rules above: 1-8 run K = 4, 9-32 K = 2, 33-64 none
    assert vllm_dense_schedule(good, 64)[1:] == [4] * 8 + [2] * 24 + [0] * 32
    gap = {
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 2, 4], [5, 6, 1]],
    }
    assert vllm_dense_schedule(gap, 8)[1:] == [4, 4, 4, 4, 1, 1, 1, 1]  # gaps and tail inherit
    for bad in ([[2, 8, 4]], [[1, 8, 4], [8, 9, 2]], [[1, 0, 4]], [[1, 8, -1]], [[1, 8]], []):
        with pytest.raises(AssertionError):
            vllm_dense_schedule(
                {"num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": bad}, 16
            )
    # DecodingBaseConfig's own example: {4: 4, 8: 2, 32: 1} runs 4 at 1-4, 2 at 5-8, 1 at 9-32,
    # none from 33
    trt = {
        "speculative_config": {
            "decoding_type": "MTP",
            "max_draft_len": 4,
            "draft_len_schedule": {4: 4, 8: 2, 32: 1},
        }
    }
    assert [trtllm_draft_len(trt, b) for b in (1, 4, 5, 8, 9, 32, 33)] == [4, 4, 2, 2, 1, 1, 0]
    trt["speculative_config"]["draft_len_schedule"] = {4: 3, 8: 4}
    with pytest.raises(AssertionError):
        trtllm_draft_len(trt, 1)


SEVERAL_RANGES = [  # deployments whose schedules switch K (engine appended)
    [
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
    ],
    [
        "--target",
        "llama-3.1-8b",
        "--draft",
        "ngram",
        "--gpu",
        "h100",
        "--acceptance-rate",
        "0.5",
        "--context-length",
        "512",
    ],
    [
        "--target",
        "deepseek-v3",
        "--method",
        "mtp",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--acceptance-rate",
        "0.8",
        "--context-length",
        "1024",
    ],
]


def _schedule(runner, tmp_path: Path, args: list[str], engine: str) -> tuple[dict, str]:
    out = tmp_path / f"config-{engine}"
    result = runner.invoke(
        app, ["schedule", *args, "--engine", engine, "--json", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out.read_text()


def _bucket_k(data: dict, batch: int) -> int:
    return next(b["draft_k"] for b in data["buckets"] if b["min_batch"] <= batch <= b["max_batch"])


@pytest.mark.parametrize("args", SEVERAL_RANGES, ids=lambda a: a[1])
def test_the_vllm_config_is_a_speculative_config_whose_table_vllm_runs_as_priced(
    runner, tmp_path, args
):
    data, text = _schedule(runner, tmp_path, [*args, "--max-batch", "1024"], "vllm")
    config = json.loads(text)
    assert config == data["config"]
    assert set(config) <= VLLM_SPECULATIVE_CONFIG_FIELDS and config["method"] in VLLM_METHODS
    largest = max(b["draft_k"] for b in data["buckets"])
    if config["num_speculative_tokens_per_batch_size"] is None:  # one K, or not worth its cost
        assert config["num_speculative_tokens"] == data["buckets"][0]["static_best_k"] or (
            len(data["buckets"]) == 1
        )
        config = {
            **config,
            "num_speculative_tokens_per_batch_size": [
                [b["min_batch"], b["max_batch"], b["draft_k"]] for b in data["buckets"]
            ],
            "num_speculative_tokens": largest,
        }
    assert config["num_speculative_tokens"] == largest  # nothing is clamped
    table = config["num_speculative_tokens_per_batch_size"]
    assert table[-1][1] == 1024  # the table reaches max_num_seqs
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(table))  # no gap
    dense = vllm_dense_schedule(config, 1024)
    assert all(dense[b] == _bucket_k(data, b) for b in range(1, 1025))


@pytest.mark.parametrize("args", SEVERAL_RANGES, ids=lambda a: a[1])
def test_the_trtllm_yaml_is_decoding_config_whose_schedule_trtllm_runs_as_priced(
    runner, tmp_path, args
):
    data, text = _schedule(runner, tmp_path, args, "trtllm")
    config = yaml.safe_load(text)
    assert json.loads(json.dumps(config)) == data["config"]  # JSON writes the keys as strings
    spec = config["speculative_config"]
    assert (
        "draft_len_schedule" in spec
        or len(data["buckets"]) == 1
        or any("not worth emitting" in n for n in data["notes"])
    )
    if "draft_len_schedule" in spec:
        assert max(spec["draft_len_schedule"]) == 2048  # TensorRT-LLM's max_batch_size
        for batch in range(1, 2049):
            assert trtllm_draft_len(config, batch) == _bucket_k(data, batch), batch
    else:
        assert trtllm_draft_len(config, 1) == spec["max_draft_len"]


def test_sglang_gets_the_flags_of_one_k(runner, tmp_path):
    data, text = _schedule(runner, tmp_path, SEVERAL_RANGES[0], "sglang")
    static = data["buckets"][0]["static_best_k"]
    assert text == (
        f"--speculative-algorithm STANDALONE --speculative-draft-model-path "
        f"meta-llama/Llama-3.2-1B --speculative-num-steps {static} --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens {static + 1}\n"
    )
    assert data["config"]["speculative_algorithm"] == "STANDALONE"
    assert any(n.startswith("SGLang has no switch of the draft length") for n in data["notes"])


def test_vllm_gets_a_table_ending_in_k0_where_drafts_stop_paying(runner, tmp_path):
    """n-gram lookup on an 8B at a short context: every draft slows decoding from some batch
    on, and the schedule beats the static K by more than vLLM's cost at small batches: the
    table is emitted, with the K = 0 range written out (later batches inherit the last K)."""
    data, text = _schedule(runner, tmp_path, SEVERAL_RANGES[1], "vllm")
    table = json.loads(text)["num_speculative_tokens_per_batch_size"]
    assert table[0][0] == 1 and table[-1][1:] == [1024, 0]
    assert all(b["speedup"] >= 1.0 for b in data["buckets"])
    assert any("it pays where your traffic runs" in n for n in data["notes"])
