"""Input safety: no network unless a Hub id is given; YAML loaded safely; outputs confined to
the chosen folder; overlays validated like built-ins."""

from __future__ import annotations

import socket
import sys

import pytest

from infersize.catalog import load_catalog
from infersize.cli import app
from infersize.errors import CatalogError
from tests.support.commands import SEED_ARGS

QUICK = """\
targets: [qwen2.5-7b]
drafts: [qwen2.5-0.5b]
gpus: [h100, l4]
context_lengths: [4096]
acceptance_rates: [0.7]
output: {cells: true}
"""


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_spec_and_sweep_touch_no_network(no_network, runner, tmp_path):
    assert runner.invoke(app, [*SEED_ARGS, "--json"]).exit_code == 0
    sweep = tmp_path / "s.yaml"
    sweep.write_text(QUICK)
    result = runner.invoke(
        app, ["sweep", "run", str(sweep), "--out", str(tmp_path / "o"), "--jobs", "1"]
    )
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["best", str(tmp_path / "o")]).exit_code == 0
    assert "huggingface_hub" not in sys.modules or "hf:" in " ".join(sys.argv)


def test_outputs_stay_inside_the_chosen_folder(runner, tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(QUICK)
    out = tmp_path / "nested" / "out"
    before = set(tmp_path.rglob("*"))
    assert runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(out)]).exit_code == 0
    created = set(tmp_path.rglob("*")) - before
    assert created and all(p == tmp_path / "nested" or out in (p, *p.parents) for p in created)
    assert {p.name for p in (out / "cells").iterdir()} == {"gpu=h100-sxm", "gpu=l4"}


def test_an_overlay_id_cannot_escape_the_output_folder(tmp_path):
    overlay = tmp_path / "evil.yaml"
    overlay.write_text(
        "gpus:\n  - id: ../../etc\n    name: x\n    memory_bytes: 1\n"
        "    memory_source: x\n    bandwidth_gb_per_s: 1\n    fp16_tflops: 1\n"
    )
    with pytest.raises(CatalogError, match=r"key 'gpus.0.id': String should match pattern"):
        load_catalog((overlay,))


def test_yaml_tags_that_construct_objects_are_refused(runner, tmp_path):
    marker = tmp_path / "pwned"
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"targets: !!python/object/apply:os.system ['touch {marker}']\n")
    result = runner.invoke(app, ["sweep", "validate", str(sweep)])
    assert result.exit_code == 2 and "invalid YAML" in result.stderr
    assert not marker.exists()
