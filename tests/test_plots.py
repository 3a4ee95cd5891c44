"""Figures render as valid PNG/SVG of sensible size; the HTML report is checked in a real,
headless Chromium (Debian's chromium package; skipped with a reason where it is absent)."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from infersize.cli import app
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep
from tests.support.figures import png_size

QUICKSTART = Path(__file__).resolve().parent.parent / "sweeps" / "quickstart.yaml"


def check_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert len(list(root.iter())) > 50  # axes, lines and text, not an empty canvas


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart")
    config, doc = load_sweep(QUICKSTART)
    run_sweep(build_plan(config, doc), out, RunOptions(jobs=1))
    return out


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_every_figure_renders(runner, sweep_dir, tmp_path, suffix):
    commands = {
        "k": ["plot", "k", "--alpha", "0.6", "--alpha", "0.8", "--latency-ratio", "12.4"],
        "batch": [
            "plot",
            "batch",
            "--target",
            "llama-3.1-70b",
            "--tp",
            "2",
            "--draft",
            "llama-3.2-1b",
            "--gpu",
            "h100",
            "--acceptance-rate",
            "0.8",
        ],
        "frontier": ["plot", "frontier", str(sweep_dir), "--gpu", "h100"],
        "spec": [
            "spec",
            "--target",
            "qwen2.5-7b",
            "--draft",
            "qwen2.5-0.5b",
            "--gpu",
            "a100",
            "--plot",
        ],
    }
    for name, args in commands.items():
        out = tmp_path / f"{name}{suffix}"
        args = [*args, str(out)] if name == "spec" else [*args, "--out", str(out)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (name, result.output)
        if suffix == ".png":
            width, height = png_size(out)
            assert 600 <= width <= 2000 and 400 <= height <= 1400, (name, width, height)
            assert out.stat().st_size > 20_000
        else:
            check_svg(out)


def test_plot_errors(runner, tmp_path):
    result = runner.invoke(
        app,
        ["plot", "k", "--alpha", "0.7", "--latency-ratio", "10", "--out", str(tmp_path / "k.jpg")],
    )
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {tmp_path / 'k.jpg'}: the figure file must end in .png or .svg\n",
    )
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            "qwen2.5-7b",
            "--draft",
            "none",
            "--gpu",
            "a100",
            "--plot",
            str(tmp_path / "x.png"),
        ],
    )
    assert result.stderr == "error: --plot draws speedup vs K, which needs a draft\n"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (CI installs Debian's chromium package)"
)
def test_report_opens_in_headless_chromium(runner, sweep_dir, tmp_path):
    report = tmp_path / "report.html"
    assert runner.invoke(app, ["report", str(sweep_dir), "--out", str(report)]).exit_code == 0
    html = report.read_text()
    assert "<script" not in html and "http" not in html.split("<svg")[0]  # self-contained
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    for gpu in ("a100-80gb-sxm", "h100-sxm", "l4"):
        assert f'<table id="best-{gpu}">' in dom
    assert dom.count("<svg") == 3 and dom.count("<tr>") >= 9
    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,900", report.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert png_size(shot) == (1200, 900)
