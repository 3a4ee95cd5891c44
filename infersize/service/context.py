"""The context axis of `spec` and the sweeps: the tokens each sequence holds in its KV cache at a
decode step (prompt plus the answer so far), given directly or from a prompt and an answer
length.

A request of I prompt tokens and O answer tokens decodes O steps; step j (1..O) attends to
I + j − 1 tokens already in the KV cache and the new one, so over the answer the KV cache holds
I + (O − 1)/2 to I + (O + 1)/2 tokens on average: I + O/2 (rounded down here), the context that
prices a serving engine's decode step (attention reads the KV cache once per step). Sizing at
I + O would price every step as the answer's last one; at I, as its first."""

from __future__ import annotations

from infersize.catalog.records import Model
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, ValueRangeError

LENGTHS = ("context_length", "input_tokens", "output_tokens")


def decode_context(
    context_length: int | None, input_tokens: int | None, output_tokens: int | None
) -> int:
    """The context of the decode step: `context_length`, or `input_tokens` + `output_tokens` / 2
    (rounded down); the default context when none is given."""
    if context_length is not None and (input_tokens is not None or output_tokens is not None):
        raise InfersizeError(
            "give {context_length} or {input_tokens} with {output_tokens}, not both",
            settings=LENGTHS,
        )
    if (input_tokens is None) != (output_tokens is None):
        raise InfersizeError(
            "{input_tokens} and {output_tokens} go together (the context is input + output/2)",
            settings=LENGTHS[1:],
        )
    if input_tokens is None or output_tokens is None:
        return DEFAULTS.context_length if context_length is None else context_length
    if input_tokens < 1:
        raise ValueRangeError("input_tokens", f"must be at least 1, got {input_tokens}")
    if output_tokens < 0:
        raise ValueRangeError("output_tokens", f"must be at least 0, got {output_tokens}")
    return input_tokens + output_tokens // 2


def max_context_tokens(model: Model) -> int | None:
    """The longest sequence a model holds (its max_position_embeddings); None for heads and
    n-gram lookup, whose positions are the target's."""
    return None if model.is_speculator_head else model.max_position_embeddings
