"""An engine's configuration as the text it reads, and that text written to a file: vLLM's
speculative_config as one line of JSON (what `vllm serve --speculative-config` takes), the
TensorRT-LLM LLM-API options as YAML (`trtllm-serve --extra_llm_api_options FILE`), SGLang's
server flags as one line.

A file is replaced only when it is one infersize wrote: text that is exactly what this module
renders for the configuration it holds. A file of anyone else's, a link or a folder is refused
(the project's rule for what it writes: docs/reliability.md)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from infersize.errors import InfersizeError
from infersize.files import InputFileError, atomic_write, decode_text, read_input

# what infersize writes into each object, and nothing else (a file holding more is a user's)
VLLM_KEYS = {"method", "model", "num_speculative_tokens", "num_speculative_tokens_per_batch_size"}
TRTLLM_KEYS = {"decoding_type", "max_draft_len", "speculative_model", "draft_len_schedule"}
SGLANG_KEYS = {
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
}
TRTLLM_HEADER = (
    "# TensorRT-LLM LLM-API options written by infersize schedule:\n"
    "# trtllm-serve MODEL --extra_llm_api_options THIS_FILE\n"
)
TRTLLM_KEYS_NOTE = (
    "# draft_len_schedule: each key an inclusive upper batch bound, as TensorRT-LLM reads\n"
    "# it since https://github.com/NVIDIA/TensorRT-LLM/pull/10860\n"
)
# where each engine takes it (the panel's heading over it)
HOW = {
    "vllm": "vllm serve MODEL with (--out FILE writes the JSON, for --speculative-config "
    '"$(cat FILE)")',
    "trtllm": "trtllm-serve MODEL --extra_llm_api_options FILE, FILE holding (--out FILE "
    "writes it)",
    "sglang": "python -m sglang.launch_server --model-path MODEL with (--out FILE writes them)",
}


def config_text(engine: str, config: Any) -> str:
    """The text the engine reads for `config` (the engine's own object), ending in a newline."""
    if engine == "vllm":
        return json.dumps(config) + "\n"
    if engine == "trtllm":
        import yaml

        scheduled = config["speculative_config"].get("draft_len_schedule") is not None
        body = yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
        return TRTLLM_HEADER + (TRTLLM_KEYS_NOTE if scheduled else "") + body
    words = []
    for name, value in config.items():
        words += ["--" + name.replace("_", "-"), shlex.quote(str(value))]
    return " ".join(words) + "\n"


def paste_text(engine: str, config: Any) -> str:
    """What to paste: vLLM's flag with its JSON quoted for a shell, else the file's text."""
    if engine == "vllm":  # a field left at its default (null) is left out of the flag
        given = {key: value for key, value in config.items() if value is not None}
        return "--speculative-config " + shlex.quote(json.dumps(given)) + "\n"
    return config_text(engine, config)


def _parsed(engine: str, text: str) -> Any:
    """The configuration `text` holds, read as `engine`'s; None where it holds none of ours."""
    if engine == "vllm":
        config = json.loads(text)
        ours = isinstance(config, dict) and set(config) <= VLLM_KEYS
        return config if ours and "num_speculative_tokens" in config else None
    if engine == "trtllm":
        import yaml

        config = yaml.safe_load(text)
        inner = config.get("speculative_config") if isinstance(config, dict) else None
        if not isinstance(inner, dict) or set(config) != {"speculative_config"}:
            return None
        return config if set(inner) <= TRTLLM_KEYS else None
    words = shlex.split(text)
    names = [w[2:].replace("-", "_") for w in words[::2]]
    ours = len(words) % 2 == 0 and all(w.startswith("--") for w in words[::2])
    config = {n: _number(v) for n, v in zip(names, words[1::2], strict=False)}
    return config if ours and set(names) <= SGLANG_KEYS else None


def _number(word: str) -> int | str:
    return int(word) if word.isdigit() else word


def written_by_infersize(text: str) -> bool:
    """Whether `text` is exactly what infersize writes for the configuration it holds."""
    import yaml

    for engine in HOW:
        try:
            config = _parsed(engine, text)
        except (ValueError, yaml.YAMLError):  # not this engine's syntax (JSON, YAML, words)
            continue
        if config is not None and config_text(engine, config) == text:
            return True
    return False


def save_config(engine: str, config: Any, out: Path) -> None:
    """Write the configuration to `out` in one rename; an existing file must be infersize's."""
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise InfersizeError(
            f"{out}: is not a regular file; choose another {{out}}", settings=("out",)
        )
    if out.exists():
        try:
            old = decode_text(read_input(out, 1 << 20))
        except InputFileError as exc:
            raise InfersizeError(str(exc)) from None
        if not written_by_infersize(old):
            raise InfersizeError(
                f"{out}: exists and is not a configuration infersize wrote; remove it or "
                "choose another {out}",
                settings=("out",),
            )
    try:
        atomic_write(out, config_text(engine, config))
    except OSError as exc:
        raise InfersizeError(f"{out}: cannot write ({exc.strerror})") from None
