"""Engine settings are declared once (infersize/core/knobs.py): their checks, the docs table made
from them, and a new setting registered in one place reaching every command, the sweep schema,
the engine and the docs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infersize.core.engine_constants import SAMPLER_BYTES_PER_LOGIT, VLLM_ENTRYPOINTS
from infersize.core.engines import EngineSettings, configure_engine, get_engine
from infersize.core.knobs import ENGINE_KNOBS, Knob, settings_table
from infersize.errors import UnknownNameError, ValueRangeError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def test_docs_settings_is_generated_from_the_declarations():
    """docs/settings.md is `python -m infersize.core.knobs`'s output, row for row."""
    generated = subprocess.run(
        [sys.executable, "-m", "infersize.core.knobs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert DOCS.read_text(encoding="utf-8") == generated
    assert settings_table() in generated
    assert generated.count("\n| `--") == len(ENGINE_KNOBS)


def test_the_choices_are_the_engines_own():
    assert set(ENGINE_KNOBS["vllm_sampler"].choices) == set(SAMPLER_BYTES_PER_LOGIT)
    assert set(ENGINE_KNOBS["vllm_entrypoint"].choices) == set(VLLM_ENTRYPOINTS)


def test_every_setting_names_a_field_the_engine_presets_have():
    engine = get_engine("vllm")
    for knob in ENGINE_KNOBS.values():
        assert hasattr(engine, knob.engine_field), knob.name


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("gpu_memory_utilization", 0.0, "gpu_memory_utilization must be in (0, 1], got 0"),
        ("gpu_memory_utilization", 1.5, "gpu_memory_utilization must be in (0, 1], got 1.5"),
        ("overhead_gib", float("nan"), "overhead_gib must be in [0, 1024] GiB, got nan"),
        ("max_num_seqs", 0, "max_num_seqs must be in 1..16,777,216 sequences, got 0"),
        (
            "max_num_tokens",
            1 << 25,
            "max_num_tokens must be in 1..16,777,216 tokens, got 33,554,432",
        ),
    ],
)
def test_a_value_outside_the_declared_range_is_refused_by_name(name, value, message):
    with pytest.raises(ValueRangeError) as caught:
        ENGINE_KNOBS[name].check(value)
    assert str(caught.value) == message


def test_the_bounds_themselves_are_taken_where_the_range_is_closed():
    ENGINE_KNOBS["gpu_memory_utilization"].check(1.0)
    ENGINE_KNOBS["overhead_gib"].check(0.0)
    ENGINE_KNOBS["max_num_seqs"].check(1)
    ENGINE_KNOBS["max_num_seqs"].check(1 << 24)


def test_a_choice_not_declared_is_refused_with_the_nearest_or_the_choices():
    with pytest.raises(UnknownNameError) as near:
        ENGINE_KNOBS["vllm_sampler"].check("torch")
    assert str(near.value) == "unknown vllm_sampler 'torch': did you mean 'pytorch'?"
    with pytest.raises(UnknownNameError) as far:
        ENGINE_KNOBS["vllm_entrypoint"].check("batch")
    assert str(far.value) == "unknown vllm_entrypoint 'batch': choose serve, offline"


def test_settings_apply_to_the_engine_field_they_name():
    engine = configure_engine(
        EngineSettings("trtllm", kv_cache_free_gpu_memory_fraction=0.8, max_batch_size=64)
    )
    assert (engine.free_gpu_memory_fraction, engine.max_batch_size) == (0.8, 64)
    vllm = configure_engine(EngineSettings("vllm", vllm_sampler="pytorch", overhead_gib=2.0))
    assert (vllm.sampler, vllm.overhead_gib, vllm.entrypoint) == ("pytorch", 2.0, "serve")


def test_an_engines_own_setting_is_refused_for_another_engine():
    with pytest.raises(ValueRangeError, match="is a setting of sglang: it does not apply to"):
        configure_engine(EngineSettings("vllm", mem_fraction_static=0.8))


def test_settings_not_given_are_the_declared_defaults_and_unknown_ones_are_refused():
    settings = EngineSettings("vllm", max_num_seqs=8, max_batch_size=None)
    assert settings.given == (("max_num_seqs", 8),)
    assert settings.get("vllm_entrypoint") == "serve"
    assert settings.as_dict()["max_batch_size"] is None
    with pytest.raises(TypeError, match="not an engine setting: block_size"):
        EngineSettings("vllm", block_size=16)


def test_an_owner_outside_the_engines_rules_is_refused_at_registration():
    from infersize.core.knobs import register_knob

    with pytest.raises(ValueError, match="owners must be among"):
        register_knob(Knob(name="x", kind=int, help="x", owners=("ollama",)))


# A new setting, registered before anything reads the declarations: TensorRT-LLM's KV cache block
# size (KvCacheConfig.tokens_per_block), which the presets hold but no flag sets today.
NEW_SETTING = """
from infersize.core.knobs import Knob, register_knob, settings_table
register_knob(Knob(name="tokens_per_block", kind=int, help="TensorRT-LLM's tokens per KV block.",
                   owners=("trtllm",), strict_owner=True, unit="tokens", low=1, high=1024))
import json
from typer.testing import CliRunner
from infersize.cli import app
from infersize.core.engines import EngineSettings, configure_engine
from infersize.sweep.config import SweepConfig
runner = CliRunner()
helps = {c: runner.invoke(app, [*c.split(), "--help"], env={"COLUMNS": "200"}).output
         for c in ("spec", "capacity", "schedule", "plot batch")}
deployment = ["spec", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gpu", "h100"]
wrong_engine = runner.invoke(app, [*deployment, "--engine", "vllm", "--tokens-per-block", "64"])
out_of_range = runner.invoke(app, [*deployment, "--engine", "trtllm", "--tokens-per-block", "0"])
taken = runner.invoke(app, [*deployment, "--engine", "trtllm", "--tokens-per-block", "64"])
base = {"targets": ["llama-3.1-8b"], "drafts": ["llama-3.2-1b"], "gpus": ["h100"],
        "engine": "trtllm", "context_lengths": [4096]}
sweep = SweepConfig.model_validate(base | {"tokens_per_block": 64})
try:
    SweepConfig.model_validate(base | {"tokens_per_block": 0})
    refused = ""
except Exception as exc:
    refused = str(exc)
print(json.dumps({
    "helps": {c: "--tokens-per-block" in h for c, h in helps.items()},
    "wrong_engine": [wrong_engine.exit_code, wrong_engine.output],
    "out_of_range": [out_of_range.exit_code, out_of_range.output],
    "taken": taken.exit_code,
    "engine": configure_engine(EngineSettings("trtllm", tokens_per_block=64)).tokens_per_block,
    "sweep": sweep.tokens_per_block,
    "refused": refused,
    "docs": "| `--tokens-per-block` | `tokens_per_block` | int | 1..1,024 | tokens |" in
            settings_table(),
}))
"""


def test_a_setting_registered_once_reaches_every_command_the_sweep_the_engine_and_the_docs():
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NEW_SETTING)],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["helps"] == dict.fromkeys(("spec", "capacity", "schedule", "plot batch"), True)
    assert seen["wrong_engine"] == [
        2,
        "error: --tokens-per-block is a setting of trtllm: it does not apply to engine vllm\n",
    ]
    assert seen["out_of_range"] == [
        2,
        "error: --tokens-per-block must be in 1..1,024 tokens, got 0\n",
    ]
    assert seen["taken"] == 0
    assert seen["engine"] == 64
    assert seen["sweep"] == 64
    assert "tokens_per_block\n  Value error, must be in 1..1,024 tokens, got 0" in seen["refused"]
    assert seen["docs"] is True
