"""The speculative methods engines ship: one registry that `--method`, the sweep's `methods`
axis, the tables' `method` column and the help are generated from. Names are vLLM's
(`--speculative-config '{"method": ...}'`, vllm/config/speculative.py).

How each drafts, as infersize prices it (only chains are modelled: engines that draft trees,
EAGLE-2's dynamic tree or SGLang's top-k, verify more tokens per step than K):
  draft           a separate small model: K sequential forward passes, its own KV cache
  eagle, eagle3   a one-layer head reading the target's hidden states: K sequential passes of
                  one layer and an LM head (EAGLE-1's is the target's, EAGLE-3's over its own
                  draft vocabulary); one layer of KV in the target's pool
  mtp             the multi-token-prediction module shipped in the checkpoint, run K times
                  (vLLM reuses its one layer past num_nextn_predict_layers); one layer of KV
  medusa          K heads proposing all positions in one pass from the last hidden state; no KV
  mlp-speculator  K small sequential stages (embedding, projection, LM head); no KV
  ngram           prompt lookup on the CPU: no weights, no KV, no GPU time
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infersize.errors import UnknownNameError
from infersize.record import record

if TYPE_CHECKING:  # the registry is read by every command's help: no pydantic import for it
    from infersize.catalog.records import Model


@record(kw_only=False)
class Method:
    name: str
    summary: str
    speculator: str | None  # the Model.speculator kind it runs (None: a separate model)
    parallel: bool = False  # one pass proposes all K tokens (Medusa)


METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    method = METHODS.get(name.strip().lower())
    if method is None:
        raise UnknownNameError("method", name, METHODS, hint=f"choose {', '.join(METHODS)}")
    return method


def method_of(drafter: Model) -> Method:
    """The method a drafter runs: its speculator kind, or a separate draft model."""
    for method in METHODS.values():
        if method.speculator == drafter.speculator:
            return method
    raise UnknownNameError("method", str(drafter.speculator), METHODS)


for _method in (
    Method("draft", "a separate small model drafts K tokens, one pass each", None),
    Method("eagle", "EAGLE-1/2 head: one layer on the target's hidden states", "eagle"),
    Method("eagle3", "EAGLE-3 head: one layer on three layers, own draft vocabulary", "eagle3"),
    Method("mtp", "the checkpoint's multi-token-prediction module", "mtp"),
    Method("medusa", "Medusa heads: all K positions in one pass", "medusa", parallel=True),
    Method("mlp-speculator", "MLP speculator: K small sequential stages", "mlp_speculator"),
    Method("ngram", "n-gram prompt lookup: no weights, no GPU time", "ngram"),
):
    register_method(_method)
