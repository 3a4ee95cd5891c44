"""The options of how an engine schedules and splits a replica (SGLang's mixed chunks, the
CUDA-graph limit, expert and attention data parallelism), shared by `spec`, `capacity` and
`schedule`; their names are EngineSettings' fields and the sweep's keys."""

from __future__ import annotations

from typing import Annotated

import typer

EnableMixedChunk = Annotated[
    bool | None,
    typer.Option(
        "--enable-mixed-chunk/--no-enable-mixed-chunk",
        help="SGLang: run prompts' chunks beside the decodes in one step (default off: prompts "
        "run in steps of their own while the decodes wait).",
    ),
]
CudaGraphMaxBs = Annotated[
    int | None,
    typer.Option(
        "--cuda-graph-max-bs",
        help="SGLang's and TensorRT-LLM's largest decode batch captured in a CUDA graph; "
        "larger batches launch their kernels from the host (default: every batch graphed).",
    ),
]
Ep = Annotated[
    int | None,
    typer.Option(
        "--ep",
        help="Expert parallel (vLLM, SGLang, TensorRT-LLM): a MoE target's routed experts split "
        "over this many groups of its TP ranks, whole experts each; the step waits for the group "
        "whose tokens touch the most (default 1: every expert split over all ranks).",
    ),
]
DpAttention = Annotated[
    bool | None,
    typer.Option(
        "--dp-attention/--no-dp-attention",
        help="Attention data parallel over the TP ranks (vLLM, SGLang, TensorRT-LLM): each rank "
        "holds the attention weights whole and the KV of its own share of the sequences.",
    ),
]
