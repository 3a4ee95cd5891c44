"""Every engine setting a user may give, declared once: its name (the library's field and the
sweep's key; the flag is --name-with-dashes), type, range, unit, default, help, and the engines
that own it. From these declarations come the command-line options of every command that takes a
deployment (cli/knob_options.py), the sweep schema's keys (sweep/config.py), the one check of a
value (`Knob.check`, whose message names the setting) and the docs table (docs/settings.md,
`python -m infersize.core.knobs`). A new engine setting is one `register_knob` here; it sets the
Engine field of the same name (or `field`), so it must name a field the presets have.

This module imports nothing heavy: every command's help reads it.
"""

from __future__ import annotations

from typing import Any

from infersize.bounds import Bound
from infersize.defaults import DEFAULTS
from infersize.errors import UnknownNameError
from infersize.record import record

MAX_STEP_TOKENS = 1 << 24  # far past any engine's step budget or running-sequence limit
MAX_OVERHEAD_GIB = 1024.0  # more than any one GPU holds
MAX_EP = 1024  # expert-parallel groups: more than any deployment has GPUs
OWNERS = ("all", "vllm", "sglang", "trtllm")  # vllm: every vLLM preset (its memory rule)


@record
class Knob(Bound):
    """An engine setting: its bounds (Bound), and what the command line, the sweep file and the
    docs say of it."""

    help: str = ""
    owners: tuple[str, ...] = ("all",)  # the memory rules whose engines read it (OWNERS)
    strict_owner: bool = False  # refused for another engine (else ignored there)
    choices: tuple[str, ...] = ()
    default: Any = None  # None: the engine preset's
    field: str | None = None  # the Engine field it sets (default: its name)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def owner_text(self) -> str:
        """The engines that read it, as messages and the docs name them."""
        return "every engine" if "all" in self.owners else ", ".join(self.owners)

    def applies_to(self, memory_rule: str) -> bool:
        """Whether an engine of this memory rule reads the setting."""
        return "all" in self.owners or memory_rule in self.owners

    @property
    def engine_field(self) -> str:
        return self.field or self.name

    def range_text(self) -> str:
        """The range, or the choices, as messages and the docs print them."""
        return ", ".join(self.choices) if self.choices else super().range_text()

    def check(self, value: Any) -> None:
        """A one-line error naming the setting unless `value` is one it takes."""
        if not self.choices:
            super().check(value)
        elif value not in self.choices:
            raise UnknownNameError(
                self.name, str(value), self.choices, hint=f"choose {', '.join(self.choices)}"
            )


ENGINE_KNOBS: dict[str, Knob] = {}


def register_knob(knob: Knob) -> Knob:
    if not set(knob.owners) <= set(OWNERS):
        raise ValueError(f"knob {knob.name}: owners must be among {', '.join(OWNERS)}")
    ENGINE_KNOBS[knob.name] = knob
    return knob


def _count(name: str, help: str, owner: str | tuple[str, ...], unit: str) -> Knob:
    """A count of tokens or sequences, 1 .. MAX_STEP_TOKENS; a setting of SGLang's or
    TensorRT-LLM's (not vLLM's) is refused for another engine."""
    owners = (owner,) if isinstance(owner, str) else owner
    strict = "vllm" not in owners
    return Knob(
        name=name,
        kind=int,
        help=help,
        owners=owners,
        strict_owner=strict,
        unit=unit,
        low=1,
        high=MAX_STEP_TOKENS,
    )


def _share(name: str, help: str, owner: str, field: str | None = None) -> Knob:
    """A share of memory, in (0, 1]; an engine's own (not vLLM's) is refused for another."""
    strict = owner in ("sglang", "trtllm")
    return Knob(
        name=name,
        kind=float,
        help=help,
        owners=(owner,),
        strict_owner=strict,
        low=0.0,
        high=1.0,
        open_low=True,
        field=field,
    )


for _knob in (
    _share(
        "gpu_memory_utilization",
        "vLLM's share of GPU memory (default 0.9).",
        "vllm",
    ),
    Knob(
        name="overhead_gib",
        kind=float,
        help="Runtime overhead per GPU, GiB (default per engine).",
        unit="GiB",
        low=0.0,
        high=MAX_OVERHEAD_GIB,
    ),
    _count(
        "max_num_batched_tokens",
        "vLLM's max_num_batched_tokens, the size of its profiling pass (default: vLLM's "
        "for the GPU).",
        "vllm",
        "tokens",
    ),
    _count(
        "max_num_seqs",
        "vLLM's max_num_seqs (default: vLLM's).",
        "vllm",
        "sequences",
    ),
    Knob(
        name="vllm_sampler",
        kind=str,
        help="vLLM's top-k/top-p sampler, whose profiling run can set the activation peak: "
        "triton (default from vLLM 0.17), pytorch (0.11-0.16, ROCm), flashinfer "
        "(VLLM_USE_FLASHINFER_SAMPLER=1).",
        owners=("vllm",),
        choices=("triton", "pytorch", "flashinfer"),
        field="sampler",
    ),
    Knob(
        name="vllm_entrypoint",
        kind=str,
        help="How vLLM is started, whose defaults for max_num_batched_tokens and max_num_seqs "
        "size its profiling pass and its batches: serve (`vllm serve`) or offline (LLM(...) in "
        "Python: twice the tokens).",
        owners=("vllm",),
        choices=("serve", "offline"),
        default=DEFAULTS.vllm_entrypoint,
        field="entrypoint",
    ),
    _share(
        "mem_fraction_static",
        "SGLang's share of the free memory for weights and KV pool (default: SGLang's "
        "for the GPU and release).",
        "sglang",
    ),
    _count(
        "chunked_prefill_size",
        "SGLang's tokens per step (default: SGLang's for the GPU).",
        "sglang",
        "tokens",
    ),
    _count(
        "max_running_requests",
        "SGLang's most sequences at once (default: from its pool; 48 when speculating).",
        "sglang",
        "sequences",
    ),
    Knob(
        name="mamba_ssm_dtype",
        kind=str,
        help="SGLang's dtype for the recurrent state of a hybrid model's linear-attention "
        "(Gated DeltaNet) layers, held in a pool of its own and read and written every step: "
        "float32 (SGLang's default; from 0.5.9 the model config's mamba_ssm_dtype where it "
        "names one) or bfloat16; the conv window stays bfloat16.",
        owners=("sglang",),
        strict_owner=True,
        choices=("float32", "bfloat16"),
    ),
    _share(
        "kv_cache_free_gpu_memory_fraction",
        "TensorRT-LLM's share of the memory left after its profiled prefill (default 0.9).",
        "trtllm",
        field="free_gpu_memory_fraction",
    ),
    _count(
        "max_num_tokens",
        "TensorRT-LLM's tokens per step and profiled prefill (default 8192).",
        "trtllm",
        "tokens",
    ),
    _count(
        "max_batch_size",
        "TensorRT-LLM's most sequences at once (default 2048).",
        "trtllm",
        "sequences",
    ),
    Knob(
        name="enable_mixed_chunk",
        kind=bool,
        help="SGLang: run prompts' chunks beside the decodes in one step (default off: prompts "
        "run in steps of their own while the decodes wait).",
        owners=("sglang",),
        strict_owner=True,
        field="mixed_prefill",
    ),
    _count(
        "cuda_graph_max_bs",
        "SGLang's and TensorRT-LLM's largest decode batch captured in a CUDA graph; larger "
        "batches launch their kernels from the host (default: every batch graphed).",
        ("sglang", "trtllm"),
        "sequences",
    ),
    Knob(
        name="ep",
        kind=int,
        help="Expert parallel: a MoE target's routed experts split over this many groups of its "
        "TP ranks, whole experts each; the step waits for the group whose tokens touch the most "
        "(default 1: every expert split over all ranks).",
        owners=("vllm", "sglang", "trtllm"),
        strict_owner=True,
        unit="groups",
        low=1,
        high=MAX_EP,
    ),
    Knob(
        name="dp_attention",
        kind=bool,
        help="Attention data parallel over the TP ranks: each rank holds the attention weights "
        "whole and the KV of its own share of the sequences.",
        owners=("vllm", "sglang", "trtllm"),
        strict_owner=True,
    ),
):
    register_knob(_knob)


def settings_table() -> str:
    """docs/settings.md's table: every engine setting as the flag, the sweep key and the docs
    give it."""
    lines = [
        "| flag | sweep key | type | range | unit | default | engines | what |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for knob in ENGINE_KNOBS.values():
        default = "the engine's" if knob.default is None else f"`{knob.default}`"
        lines.append(
            f"| `{knob.flag}` | `{knob.name}` | {knob.kind.__name__} | {knob.range_text()} | "
            f"{knob.unit} | {default} | {knob.owner_text} | {knob.help} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(
        "# Engine settings\n\nEvery engine setting `spec`, `capacity`, `schedule`, `plot batch` "
        "and sweep files take, generated from their one declaration (`infersize/core/knobs.py`; "
        "regenerate with `python -m infersize.core.knobs > docs/settings.md`). A setting of "
        "SGLang or TensorRT-LLM (or of the serving engines alone) given with another engine is an "
        "error; vLLM's are ignored by the engines that do not read them.\n"
    )
    print(settings_table(), end="")
