"""Every default a user can leave out, declared once.

The command-line options, the library's request records (`SpecRequest`, `DeploymentRequest`), the
sweep schema and the sweep's scoring all take their defaults from `DEFAULTS`, so the three front
doors cannot disagree (tests/test_defaults.py holds each of them to these fields).
"""

from __future__ import annotations

from typing import Literal

from infersize.record import record


@record
class Defaults:
    target_quant: str = "auto"  # the checkpoint's own precision (exact bytes from its files)
    draft_quant: str = "auto"
    kv_dtype: str = "fp16"
    tp: int = 1
    engine: str = "plain"
    capacity_engine: str = "vllm"  # capacity serves a scheduler: an engine's, not a sum of parts
    schedule_engine: str = "vllm"  # whose per-batch-size draft length `schedule` writes
    # whose batch defaults size vLLM's profiling pass: `vllm serve` (serve) or LLM(...) (offline)
    vllm_entrypoint: str = "serve"
    # prices verification at the batch asked; `spec` switches to leviathan when γ is given
    speedup_model: str = "roofline"
    speedup_model_given_latency_ratio: str = "leviathan"
    context_length: int = 4096  # tokens in each sequence's KV cache at decode
    batch_size: int = 1
    draft_k: int = 4
    eagle_topk: int = 1  # draft candidates per node: 1 drafts a chain, more a tree (SGLang's name)
    max_k: int = 16  # the largest K `spec` and the figures search
    sweep_draft_k_stop: int = 8  # a sweep without `draft_k` scores K = 1 .. this
    units: str = "gib"
    # a sweep's tables name one precision per row, so its precision axes default to the
    # 16-bit format most checkpoints ship in rather than to each checkpoint's own
    sweep_quant: str = "bf16"
    memory_headroom: float = 0.0  # a sweep's share of GPU memory kept free besides the engine's
    best_top_n: int = 3  # a sweep's ranks kept per group in best_pairs
    output_formats: tuple[Literal["parquet", "csv"], ...] = (
        "parquet",
        "csv",
    )  # a sweep's tables, each in both
    # capacity: requests simulated per run, the seed of their draws, and the fleet's headroom
    # (replicas = ceil(headroom × target rate / capacity))
    capacity_requests: int = 2000
    # capacity searches under independent draws: their mean is the answer, their spread its
    # 95 % interval (core/serving/interval.py)
    capacity_replications: int = 5
    # capacity sweeps: rows at most unless the file raises it (about 30 ms a row: 25 minutes)
    capacity_max_rows: int = 50_000
    seed: int = 0
    headroom: float = 1.0
    arrival: str = "poisson"
    capacity_simulate_top: int = 3  # capacity sweeps: rows per group the simulator confirms
    # --draft auto: the precisions a separate draft model is ranked at (each that the GPU runs
    # under the engine): its 16-bit checkpoint, FP8 and 4-bit weights (GPTQ/AWQ g128)
    draft_auto_quants: tuple[str, ...] = ("bf16", "fp8", "int4")


DEFAULTS = Defaults()
