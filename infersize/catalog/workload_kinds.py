"""Kinds of traffic, as acceptance depends on them: how much an answer repeats its prompt decides
what n-gram lookup accepts (a study walking vLLM's own n-gram traces, arXiv 2601.11580, finds
E 1.40 on chat and 2.04 on code editing at K = 3), and EAGLE-3 heads accept more on code and
math than on open chat. One registry: `--workload-kind`, the sweep's `workload_kind:` and
`kind:` keys, the acceptance catalog's `workload_kind` and the help come from it."""

from __future__ import annotations

from typing import Literal, get_args

from infersize.errors import UnknownNameError

WorkloadKind = Literal[
    "chat", "code", "code-editing", "summarization", "math", "qa", "translation", "mixed"
]
WORKLOAD_KINDS: dict[str, str] = {
    "chat": "open conversation (ShareGPT, MT-Bench, Alpaca)",
    "code": "writing new code (HumanEval, MBPP, LiveCodeBench)",
    "code-editing": "rewriting code given in the prompt (InstructCoder, edit benchmarks)",
    "summarization": "summaries and RAG answers drawn from a long given context (CNN/DM)",
    "math": "step-by-step reasoning (GSM8K, MATH)",
    "qa": "short answers to questions (GPQA, FinanceQA)",
    "translation": "translating a given text (WMT)",
    "mixed": "a benchmark spanning several kinds (Spec-Bench overall)",
}
ALIASES = {"rag": "summarization", "editing": "code-editing", "code_editing": "code-editing"}
assert tuple(WORKLOAD_KINDS) == get_args(WorkloadKind)  # one vocabulary, declared here


def workload_kind(name: str) -> WorkloadKind:
    """A kind's name, an alias resolved ('rag' is summarization: the answer draws on a given
    context)."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    for kind in get_args(WorkloadKind):
        if kind == key:
            return kind  # type: ignore[no-any-return]
    raise UnknownNameError(
        "workload kind", name, WORKLOAD_KINDS, hint=f"choose {', '.join(WORKLOAD_KINDS)}"
    )
