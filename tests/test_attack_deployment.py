"""Deployments `capacity` serves that no engine would as asked: a draft model whose context is
shorter than the requests is named, as `spec` names it."""

from __future__ import annotations

import json

from infersize.cli import app


def test_requests_longer_than_the_drafts_context_are_named(runner):
    args = [
        "capacity",
        "--target",
        "qwen2.5-7b",
        "--draft",
        "qwen2.5-0.5b",
        "--gpu",
        "h100",
        "--acceptance-rate",
        "0.7",
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
