"""Deployments `capacity` serves that no engine would as asked, and names from a catalog
overlay: a draft model whose context is shorter than the requests is named, as `spec` names it;
a GPU name holding Rich markup or mathtext is printed and drawn as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infersize.cli import app
from tests.support.commands import ALPHA, QWEN_CAPACITY


def test_requests_longer_than_the_drafts_context_are_named(runner):
    args = [
        *QWEN_CAPACITY,
        *ALPHA,
        "--input-tokens",
        "60000",
        "--output-tokens",
        "100",
        "--requests",
        "20",
        "--request-rate",
        "0.1",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    notes = json.loads(result.output)["notes"]
    assert (
        "requests of up to 60,100 tokens are longer than qwen2.5-0.5b's max_position_embeddings "
        "(32,768)" in notes
    )
    assert not any("qwen2.5-7b's max_position_embeddings" in note for note in notes)


HOSTILE_NAME = r"Evil $\frac{1}{$ GPU [link=https://x.example]y[/link] [bold red]z[/]"


def _hostile_gpu(tmp_path):
    """An overlay GPU (an H100's numbers) whose marketed name holds Rich markup and mathtext."""
    import yaml

    catalog = yaml.safe_load((Path(__file__).parent.parent / "configs" / "gpus.yaml").read_text())
    (h100,) = (g for g in catalog["gpus"] if g["id"] == "h100-sxm")
    entry = {**h100, "id": "evil-gpu", "aliases": [], "name": HOSTILE_NAME}
    entry.pop("sources", None)
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump({"gpus": [entry]}))
    return path


def _capacity_on(overlay, *extra):
    return [
        "capacity",
        "--catalog",
        str(overlay),
        "--target",
        "qwen2.5-7b",
        "--draft",
        "qwen2.5-0.5b",
        "--gpu",
        "evil-gpu",
        "--acceptance-rate",
        "0.7",
        "--requests",
        "100",
        "--input-tokens",
        "500",
        "--output-tokens",
        "100",
        "--request-rate",
        "1",
        *extra,
    ]


def test_a_gpu_name_with_markup_is_printed_as_it_is(runner, tmp_path):
    result = runner.invoke(app, _capacity_on(_hostile_gpu(tmp_path)))
    assert result.exit_code == 0, result.output
    assert f"on {HOSTILE_NAME} × 1 (vllm)" in result.output


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_a_gpu_name_with_mathtext_is_drawn_as_it_is(runner, tmp_path, suffix):
    figure = tmp_path / f"capacity{suffix}"
    sla = ["--sla", "ttft:p99<=2s", "--target-request-rate", "5"]
    result = runner.invoke(app, _capacity_on(_hostile_gpu(tmp_path), *sla, "--plot", str(figure)))
    assert result.exit_code == 0, result.output
    assert figure.stat().st_size > 0
    if suffix == ".svg":  # matplotlib keeps the title's text in a comment of the SVG
        assert HOSTILE_NAME.replace("&", "&amp;") in figure.read_text()
