"""The README's catalog counts are the catalog's: a model or GPU added to configs/ without
updating the README fails here (`infersize models list` and `gpus list` print the same counts)."""

from __future__ import annotations

import re
from pathlib import Path

from infersize.cli import app

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _counts(pattern: str) -> list[int]:
    found = [int(n.replace(",", "")) for n in re.findall(pattern, README)]
    assert found, f"the README no longer says {pattern!r}: update this test with it"
    return found


def test_model_count(catalog, runner):
    listed = runner.invoke(app, ["models", "list"]).stdout.split()[:2]
    assert listed == [str(len(catalog.models.records)), "models"]
    assert _counts(r"infersize models list\s+# ([\d,]+) models") == [len(catalog.models.records)]


def test_gpu_count(catalog, runner):
    listed = runner.invoke(app, ["gpus", "list"]).stdout.split()[:2]
    assert listed == [str(len(catalog.gpus.records)), "GPUs"]
    assert _counts(r"infersize gpus list\s+# ([\d,]+) GPUs") == [len(catalog.gpus.records)]


def test_published_pairs_behind_the_prior(catalog):
    fitted = catalog.prior.pairs_fitted
    assert fitted == len(catalog.prior_rows)
    assert set(_counts(r"fitted to ([\d,]+) published pairs")) == {fitted}
