"""The design is visible in the tree and checked: module and function sizes, the registries
that every choice is generated from, and no comment pointing outside the repository."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from infersize.cli import app
from infersize.core.arrays import FloatArray, floats
from infersize.core.engines import ENGINES, Engine, register_engine
from infersize.core.speedup import SPEEDUP_MODELS, SpeedupModel, StepTimes, register_speedup_model
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep
from tests.support.commands import SEED_ARGS

PACKAGE = Path(__file__).resolve().parent.parent / "infersize"
SOURCES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_small(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{node.name}: {length} lines"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_comment_points_outside_the_repository(path):
    source = path.read_text()
    # the design notes and shared folder of the machine it was written on, named in parts so
    # that this check does not name them itself
    for outside in ("../" + "shared", "/work/", "DESIGN" + " §", "DESIGN" + ".md"):
        assert outside not in source


def _private_imports(tree: ast.AST) -> list[str]:
    """Modules imported whose dotted name has a `_`-prefixed part, outside infersize itself
    (`from typer._coercion import ...`, `import click._compat`, `from typer import _x`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "infersize" and any(p.startswith("_") for p in parts[1:]):
                found.append(name)
    return found


def test_the_private_import_check_finds_one():
    tree = ast.parse("from typer._coercion import x\nimport click._compat\nfrom typer import _y")
    assert _private_imports(tree) == [
        "typer._coercion",
        "typer._coercion.x",
        "click._compat",
        "typer._y",
    ]
    assert _private_imports(ast.parse("from typer.core import TyperGroup\nimport os.path")) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_private_module_of_another_package(path):
    """Only the public API of our dependencies: their `_`-prefixed modules can change in any
    release without notice."""
    assert _private_imports(ast.parse(path.read_text())) == []


LIBRARY = [
    p for p in SOURCES if p.relative_to(PACKAGE).parts[0] in ("core", "catalog", "service", "sweep")
]


def _raised_text(tree: ast.AST) -> list[str]:
    """The string pieces of every raised exception's arguments."""
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    texts.append(part.value)
    return texts


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_errors_name_no_flag_and_no_command(path):
    """The command line words its flags and commands (cli/app.py renders the `{setting}` and
    `{command}` placeholders of InfersizeError); the library below it names neither."""
    for text in _raised_text(ast.parse(path.read_text())):
        assert not re.search(r"(^|[\s(])--[a-z]", text), text
        assert "'infersize " not in text and '"infersize ' not in text, text


def _toy_tokens(alpha: FloatArray, k: FloatArray) -> FloatArray:
    """A made-up model for the test: every draft token adds α/100 to the tokens of a step..."""
    return floats(1.0 + alpha * k / 100.0)


def _toy_cost(k: FloatArray, times: StepTimes) -> FloatArray:
    """...and a speculative step costs one plain step, so S = 1 + αK/100."""
    return floats(np.ones_like(k * times.target))


@pytest.fixture
def toy_model():
    register_speedup_model(
        SpeedupModel(
            name="toy",
            label="Toy Speedup",
            summary="S = 1 + αK/100",
            step_cost=_toy_cost,
            tokens_per_step=_toy_tokens,
        )
    )
    yield SPEEDUP_MODELS["toy"]
    del SPEEDUP_MODELS["toy"]


def test_a_registered_speedup_model_reaches_spec_the_sweep_and_the_tables(
    toy_model, runner, tmp_path
):
    data = json.loads(runner.invoke(app, [*SEED_ARGS, "--speedup-model", "toy", "--json"]).stdout)
    assert data["speedup_model"] == "toy"
    assert data["speedup"] == pytest.approx(1.0 + 0.72 * 4 / 100)
    assert "Toy Speedup:" in runner.invoke(app, [*SEED_ARGS, "--speedup-model", "toy"]).stdout
    sweep = tmp_path / "toy.yaml"
    sweep.write_text(
        "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\ngpus: [a100]\ncontext_lengths: [4096]\n"
        "acceptance_rates: [0.72]\ndraft_k: [1, 2, 3, 4]\nspeedup_model: toy\n"
    )
    config, doc = load_sweep(sweep)
    run_sweep(build_plan(config, doc), tmp_path / "out", RunOptions(jobs=1))
    best = pl.read_parquet(tmp_path / "out" / "best_pairs.parquet")
    assert set(best["speedup_model"]) == {"toy"}
    assert np.allclose(best["speedup"], 1.0 + 0.72 * best["optimal_k"] / 100)
    assert (best["optimal_k"] == 4).all()  # the toy speedup rises with K


def test_an_unregistered_speedup_model_is_refused_with_the_registry_listed(runner, tmp_path):
    sweep = tmp_path / "bad.yaml"
    sweep.write_text(
        "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\ngpus: [a100]\ncontext_lengths: [4096]\n"
        "acceptance_rates: [0.72]\nspeedup_model: toy\n"
    )
    result = runner.invoke(app, ["sweep", "validate", str(sweep)])
    assert result.exit_code == 2
    choices = ", ".join(SPEEDUP_MODELS)
    assert f"key 'speedup_model': Value error, unknown speedup model 'toy': choose {choices}" in (
        result.stderr
    )


def _spec_help_after(code: str) -> str:
    """`spec --help` in a fresh interpreter after `code` ran (a plugin registering something
    before the command line is built), its box taken away and its lines unwrapped."""
    done = subprocess.run(
        [sys.executable, "-c", code + "from infersize.cli import app\napp(['spec', '--help'])\n"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "200", "PATH": ""},
    )
    return " ".join(done.stdout.replace("│", " ").split())


def test_help_lists_the_registered_speedup_models():
    """The help text is generated from the registry: a model registered before the command
    line is built (a plugin) appears in `spec --help`."""
    code = (
        "from infersize.core.speedup import SpeedupModel, register_speedup_model\n"
        "register_speedup_model(SpeedupModel(name='toy', label='Toy Speedup', summary='a made-up "
        "model for the test', step_cost=lambda k, t: 1 + k))\n"
    )
    text = _spec_help_after(code)
    for name in (*SPEEDUP_MODELS, "toy"):
        assert f"{name}:" in text, name
    assert "a made-up model for the test" in text


@pytest.fixture
def toy_engine():
    """A made-up engine preset: the sum of the parts, with 2 GiB of runtime overhead."""
    register_engine(
        Engine(
            name="toy",
            description="a made-up engine for the test",
            overhead_gib=2.0,
            tp_overhead_gib=0.0,
        )
    )
    yield ENGINES["toy"]
    del ENGINES["toy"]


def test_a_registered_engine_reaches_spec_the_sweep_and_the_tables(toy_engine, runner, tmp_path):
    data = json.loads(runner.invoke(app, [*SEED_ARGS, "--engine", "toy", "--json"]).stdout)
    assert data["engine"] == "toy"
    assert data["overhead_bytes"] == 2 * 2**30
    sweep = tmp_path / "toy.yaml"
    sweep.write_text(
        "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\ngpus: [a100]\ncontext_lengths: [4096]\n"
        "acceptance_rates: [0.72]\ndraft_k: [1, 2, 3, 4]\nengine: toy\n"
    )
    config, doc = load_sweep(sweep)
    run_sweep(build_plan(config, doc), tmp_path / "out", RunOptions(jobs=1))
    best = pl.read_parquet(tmp_path / "out" / "best_pairs.parquet")
    assert set(best["engine"]) == {"toy"}
    assert np.allclose(best["overhead_gib"], 2.0)


def test_an_unregistered_engine_is_refused_with_the_registry_listed(runner, tmp_path):
    sweep = tmp_path / "bad.yaml"
    sweep.write_text(
        "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\ngpus: [a100]\ncontext_lengths: [4096]\n"
        "acceptance_rates: [0.72]\nengine: tgi\n"
    )
    result = runner.invoke(app, ["sweep", "validate", str(sweep)])
    assert result.exit_code == 2
    choices = ", ".join(ENGINES)
    assert f"key 'engine': Value error, unknown engine 'tgi': choose {choices}" in result.stderr


def test_help_lists_the_registered_engines():
    """`--engine`'s help is generated from the registry: an engine registered before the
    command line is built appears in `spec --help`, with its description."""
    code = (
        "from infersize.core.engines import Engine, register_engine\n"
        "register_engine(Engine(name='toy', description='a made-up engine for the test', "
        "overhead_gib=2.0, tp_overhead_gib=0.0))\n"
    )
    text = _spec_help_after(code)
    for name in (*ENGINES, "toy"):
        assert f"{name}:" in text, name
    assert "a made-up engine for the test" in text
