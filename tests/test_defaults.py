"""Every default is declared once (infersize/defaults.py): the command line, the library's request
records, the sweep schema and the sweep's scoring must each read it, never restate it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import typer

from infersize.cli import app
from infersize.cli.options import record_from_options
from infersize.core.engines import EngineSettings
from infersize.core.knobs import ENGINE_KNOBS
from infersize.defaults import DEFAULTS
from infersize.service.context import decode_context
from infersize.service.request import SpecRequest, default_speedup_model
from infersize.service.resolve import DeploymentRequest
from infersize.sweep.config import SweepConfig
from infersize.sweep.settings import Scoring


def _command(*path: str) -> Any:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def _option_defaults(*path: str) -> dict[str, object]:
    return {p.name: p.default for p in _command(*path).params if p.name}


def _record_defaults(record: type) -> dict[str, object]:
    return {
        f.name: f.default
        for f in dataclasses.fields(record)
        if f.default is not dataclasses.MISSING
    }


@pytest.mark.parametrize("command", [("spec",), ("plot", "batch")])
def test_every_option_that_has_a_default_field_takes_it_from_defaults(command):
    options = _option_defaults(*command)
    if options.get("speedup_model", DEFAULTS.speedup_model) is None:  # chosen by whether γ is given
        assert default_speedup_model(None) == DEFAULTS.speedup_model
        assert default_speedup_model(12.4) == DEFAULTS.speedup_model_given_latency_ratio
        options.pop("speedup_model")
    if options.get("context_length", DEFAULTS.context_length) is None:  # or input + output/2
        assert decode_context(None, None, None) == DEFAULTS.context_length
        options.pop("context_length")
    for name, value in dataclasses.asdict(DEFAULTS).items():
        if name in options:
            assert options[name] == value, f"{'/'.join(command)} --{name}"


def test_spec_options_cover_every_field_of_the_records_it_builds():
    """A field with no option of its name would silently keep the record's default."""
    options = _option_defaults("spec")
    # the nested records themselves; the (input, output) tokens of --input-tokens/--output-tokens
    built_elsewhere = {"deployment", "engine", "decode_lengths"}
    assert {"input_tokens", "output_tokens"} <= set(options)
    for record in (DeploymentRequest, SpecRequest):
        missing = {f.name for f in dataclasses.fields(record)} - set(options) - built_elsewhere
        assert not missing, f"{record.__name__}: {missing}"


def test_the_records_defaults_are_the_declared_ones():
    declared = dataclasses.asdict(DEFAULTS)
    for record in (DeploymentRequest, SpecRequest, Scoring):
        for name, value in _record_defaults(record).items():
            if name in declared and value is not None:  # None: chosen at run time
                assert value == declared[name], f"{record.__name__}.{name}"
    assert EngineSettings().engine == DEFAULTS.engine


def test_the_sweep_schema_reads_the_same_defaults():
    fields = SweepConfig.model_fields
    assert fields["engine"].default == DEFAULTS.engine
    assert fields["speedup_model"].default == DEFAULTS.speedup_model
    assert fields["kv_dtypes"].default == [DEFAULTS.kv_dtype]
    assert fields["batch_sizes"].default == [DEFAULTS.batch_size]
    assert fields["target_quants"].default == [DEFAULTS.sweep_quant]
    assert fields["draft_k"].default.stop == DEFAULTS.sweep_draft_k_stop
    # what the sweep scores with when the file says nothing: the same speedup model as spec
    assert Scoring().speedup_model == DEFAULTS.speedup_model


def test_record_from_options_takes_the_options_of_the_fields_names_only():
    built = record_from_options(
        DeploymentRequest, {"target": "llama-3.1-8b", "gpu": "h100", "units": "gb"}, tp=2
    )
    assert built == DeploymentRequest(target="llama-3.1-8b", gpu="h100", tp=2)


@pytest.mark.parametrize("command", [("spec",), ("capacity",), ("schedule",), ("plot", "batch")])
def test_every_command_that_takes_a_deployment_takes_every_engine_setting(command):
    """Each setting's option comes from its declaration, with its declared default."""
    options = _option_defaults(*command)
    for knob in ENGINE_KNOBS.values():
        assert options[knob.name] == knob.default, f"{'/'.join(command)} {knob.flag}"
    assert ENGINE_KNOBS["vllm_entrypoint"].default == DEFAULTS.vllm_entrypoint
