"""What each engine takes for a draft length per batch size, in its own terms: the object its
configuration reads (vLLM's speculative_config, TensorRT-LLM's LLM-API YAML, SGLang's server
arguments), what running with a schedule costs it where that is measured, and the notes that
say how each reads the table.

vLLM (vllm/config/speculative.py, vllm/v1/spec_decode/dynamic/utils.py at
vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d; merged in
https://github.com/vllm-project/vllm/pull/32374): num_speculative_tokens_per_batch_size is a
list of inclusive [start, end, K] ranges, positive, sorted, non-overlapping, the first from 1; a
gap and the batches past the last range inherit the K before them, so a K = 0 range is written
out; K is clamped to num_speculative_tokens, the largest K, which sizes buffers at start.

TensorRT-LLM (DecodingBaseConfig in tensorrt_llm/llmapi/llm_args.py at
NVIDIA/TensorRT-LLM@0004396720054fd8e205cbf616f21f0b57c6b412, the lookup in
tensorrt_llm/_torch/speculative/utils.py at
NVIDIA/TensorRT-LLM@011d0933dcb5e592f5fa2626beaf42a96324c578):
draft_len_schedule maps batch sizes to draft lengths, each key an inclusive upper bound (the
first key at or above the batch applies; past the largest, 0); its smallest key must map to
max_draft_len and no value may exceed it.

SGLang (python/sglang/srt/server_args.py at
sgl-project/sglang@45a85efc3aee65c57a374bcd274a6d1243b461c0): no switch by batch size; one K
for every batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infersize.core.arrays import FloatArray, floats
from infersize.core.engines import Engine
from infersize.core.methods import Method
from infersize.errors import ValueRangeError
from infersize.service.resolve import Deployment

Table = list[tuple[int, int, int]]  # inclusive (first batch, last batch, K) ranges from batch 1

FAMILIES = ("vllm", "trtllm", "sglang")  # an engine's memory_rule names its family
# the engine setting that caps the sequences run at once, which the table must reach
RUNNING_SETTING = {
    "vllm": "max_num_seqs",
    "trtllm": "max_batch_size",
    "sglang": "max_running_requests",
}
VLLM_METHODS = {
    "draft": "draft_model",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "mtp": "mtp",
    "medusa": "medusa",
    "mlp-speculator": "mlp_speculator",
    "ngram": "ngram",
}
# TensorRT-LLM's decoding_type of each method (its PyTorch backend has no Medusa or MLP
# speculator); "Draft_Target" was "DraftTarget" in older releases
TRTLLM_TYPES = {
    "draft": "Draft_Target",
    "eagle": "Eagle",
    "eagle3": "Eagle3",
    "mtp": "MTP",
    "ngram": "NGram",
}
# SGLang's --speculative-algorithm of each method (NEXTN runs the checkpoint's MTP layer)
SGLANG_ALGORITHMS = {
    "draft": "STANDALONE",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "ngram": "NGRAM",
}
# The earliest vLLM release known to take num_speculative_tokens_per_batch_size (merged
# 2026-06-14; 0.27.1 ran it in the measurement below); the vllm-0.15 preset (0.11-0.17) predates it
VLLM_SCHEDULE_SINCE = (0, 27)

# vLLM's cost of running with a schedule, measured at K = 0 everywhere (no draft tokens), so
# all of it is the schedule's: TPOT +6.56 % at 2 concurrent requests (14.374 -> 15.317 ms) and
# +21.58 % at 189 (77.164 -> 93.820 ms); vLLM 0.27.1, H100 NVL, Gemma-4-31B FP8, V1 runner,
# whose full CUDA graphs a schedule forces down to piecewise ones
# (https://github.com/vllm-project/vllm/issues/49548)
VLLM_COST_BATCHES = (2.0, 189.0)
VLLM_COST_TPOT = (0.0656, 0.2158)
VLLM_COST_SOURCE = "https://github.com/vllm-project/vllm/issues/49548"


def schedule_family(engine: Engine) -> str:
    """vllm, trtllm or sglang: whose configuration the schedule is written for."""
    if engine.memory_rule not in FAMILIES:
        raise ValueRangeError(
            "engine",
            f"{engine.name} has no draft length to set per batch size: choose vllm, trtllm or "
            "sglang",
        )
    release = tuple(int(p) for p in engine.release.split(".")[:2])
    if engine.memory_rule == "vllm" and release < VLLM_SCHEDULE_SINCE:
        raise ValueRangeError(
            "engine",
            f"{engine.name} (vLLM {engine.release} rules) predates vLLM's draft length per batch "
            "size (https://github.com/vllm-project/vllm/pull/32374): choose vllm",
        )
    return engine.memory_rule


def check_method(family: str, method: Method) -> None:
    """One line where the engine has no such speculative method."""
    names = {"trtllm": TRTLLM_TYPES, "sglang": SGLANG_ALGORITHMS}.get(family)
    if names is not None and method.name not in names:
        engine = "TensorRT-LLM's PyTorch backend" if family == "trtllm" else "SGLang"
        raise ValueRangeError(
            "engine", f"{family}: {engine} has no {method.name} drafter; choose vllm, which has"
        )


def vllm_cost(batches: FloatArray) -> FloatArray:
    """vLLM's TPOT cost of a schedule at each batch, interpolated on the log batch axis between
    the two measurements (held at the nearer one outside them)."""
    return floats(np.interp(np.log(batches), np.log(VLLM_COST_BATCHES), VLLM_COST_TPOT))


def engine_config(family: str, dep: Deployment, method: Method, table: Table) -> Any:
    """The engine's own object for the ranges of `table` (one range: a static K); None when
    no range speculates."""
    largest = max(k for _, _, k in table)
    if largest == 0:
        return None
    assert dep.draft is not None
    repo = dep.draft.model.hf_repo
    if family == "sglang":
        return _sglang(method, repo, largest)
    if family == "trtllm":
        spec: dict[str, Any] = {"decoding_type": TRTLLM_TYPES[method.name]}
        spec["max_draft_len"] = largest
        if method.name not in ("mtp", "ngram"):  # MTP reads the target's own layers
            spec["speculative_model"] = repo
        # null: no schedule, the field's own default (scripts find the key either way)
        schedule = {last: k for _, last, k in table} if len(table) > 1 else None
        spec["draft_len_schedule"] = schedule
        return {"speculative_config": spec}
    config: dict[str, Any] = {"method": VLLM_METHODS[method.name]}
    if method.name not in ("mtp", "ngram"):  # vLLM defaults both to the target's own
        config["model"] = repo
    config["num_speculative_tokens"] = largest
    # null: no table, the field's own default (scripts find the key either way)
    table_field = [list(r) for r in table] if len(table) > 1 else None
    config["num_speculative_tokens_per_batch_size"] = table_field
    return config


def _sglang(method: Method, repo: str, k: int) -> dict[str, Any]:
    """SGLang's server arguments for a chain of K drafts (NGRAM verifies its K + 1 tokens)."""
    args: dict[str, Any] = {"speculative_algorithm": SGLANG_ALGORITHMS[method.name]}
    if method.name in ("draft", "eagle", "eagle3"):
        args["speculative_draft_model_path"] = repo
    if method.name != "ngram":
        args |= {"speculative_num_steps": k, "speculative_eagle_topk": 1}
    return args | {"speculative_num_draft_tokens": k + 1}


def reading_notes(family: str, scheduled: bool) -> list[str]:
    """How the engine reads what config holds."""
    if family == "sglang":
        return [
            "SGLang has no switch of the draft length by batch size as of its 2026 releases "
            "(--speculative-adaptive moves the steps with acceptance, not batch size; "
            "https://github.com/sgl-project/sglang/pull/37237, batch-level hybrid speculative "
            "decoding, is not merged): config holds the server arguments of the static K, "
            "--speculative-num-draft-tokens = K + 1 (a chain)"
        ]
    if not scheduled:
        return []
    if family == "trtllm":
        return [
            "draft_len_schedule's keys are inclusive upper batch bounds, as TensorRT-LLM reads "
            "them since https://github.com/NVIDIA/TensorRT-LLM/pull/10860 (early 2026): the first "
            "key at or above the batch applies, past the largest none; releases before it read "
            "keys as lower bounds (https://github.com/NVIDIA/TensorRT-LLM/pull/8194), where this "
            "table means something else: check your release's get_draft_len_for_batch_size",
            "TensorRT-LLM follows the schedule only in modes with a dynamic draft length (one-"
            "model EAGLE-3 and MTP-Eagle among them); vanilla MTP with max_draft_len above 1 "
            "ignores it, and some modes floor the draft length at 1 instead of 0",
        ]
    return [
        "vLLM reads each [start, end, K] as an inclusive range of batch sizes, the number of "
        "requests scheduled in a step (prefills included); a gap or the batches past the last "
        "range inherit the K before them, so the table runs from 1 to max_num_seqs without gaps "
        "and writes K = 0 out where speculation stops paying; num_speculative_tokens, the "
        "largest K, sizes buffers and lookahead slots at start",
        "vLLM drops the schedule under data parallelism (DP > 1) and runs num_speculative_tokens",
    ]
