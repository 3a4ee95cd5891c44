"""The README's capacity deployment as command-line arguments, for the tests that ask its
questions: Llama-3.1-70B FP8 on 2×H100 under vLLM (the draft left to each test), 1,024-token
prompts and 256-token answers measured at 2 req/s, p99 TTFT ≤ 2 s and TPOT ≤ 50 ms at a fleet
rate of 20 req/s; QUICK serves fewer requests once, so a test runs in seconds."""

from __future__ import annotations

TARGET = [
    "--target",
    "llama-3.1-70b",
    "--target-quant",
    "fp8",
    "--gpu",
    "h100",
    "--tp",
    "2",
    "--engine",
    "vllm",
]
LOAD = ["--input-tokens", "1024", "--output-tokens", "256", "--request-rate", "2"]
SLA = ["--sla", "ttft:p99<=2000ms;tpot:p99<=50ms", "--target-request-rate", "20"]
QUICK = ["--requests", "400", "--replications", "1"]
