"""Parameter counts from config fields against published totals (tests/data/published_params.csv,
each row with its source: Hugging Face safetensors totals and model cards)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from infersize.core.params import param_counts

with (Path(__file__).parent / "data/published_params.csv").open() as _f:
    PUBLISHED = list(csv.DictReader(_f))


def test_published_table_covers_the_catalog(catalog):
    assert len(PUBLISHED) >= 44
    assert {row["model"] for row in PUBLISHED} <= set(catalog.models.records)


@pytest.mark.parametrize("row", PUBLISHED, ids=[r["model"] for r in PUBLISHED])
def test_count_equals_published_total_exactly(catalog, row):
    assert param_counts(catalog.model(row["model"])).total == int(row["published_params"])


def test_components_add_up_for_qwen2_5_7b(catalog):
    # Qwen2.5-7B: untied 152064 x 3584 embedding and lm_head, q/k/v biases (Qwen2 architecture)
    counts = param_counts(catalog.model("qwen2.5-7b"))
    assert counts.embedding == counts.lm_head == 152064 * 3584
    assert counts.total == counts.embedding + counts.lm_head + counts.linear + counts.small
    assert counts.active == counts.total  # dense


def test_tied_embeddings_count_once(catalog):
    counts = param_counts(catalog.model("qwen2.5-0.5b"))
    assert counts.lm_head == 0 and counts.embedding == 151936 * 896


def test_mixtral_active_params(catalog):
    # Mixtral 8x7B: 2 of 8 experts per token; Mistral AI quotes 12.9B active of 46.7B
    counts = param_counts(catalog.model("mixtral-8x7b"))
    assert counts.total == 46_702_792_704
    assert counts.active == pytest.approx(12.9e9, rel=0.01)
    assert counts.mlp_routed == counts.mlp  # no shared experts


def test_moe_and_mla_models(catalog):
    # DeepSeek-V3 main model (MLA, 3 dense + 58 MoE layers, 256 routed + 1 shared expert):
    # 671,026,419,200 from checkpoint-header audits (tests/data/published_params.csv)
    v3 = param_counts(catalog.model("deepseek-v3"))
    assert v3.total == 671_026_419_200
    assert 36e9 < v3.active < 38e9  # DeepSeek quotes 37B activated
    # Qwen3-30B-A3B: 30.5B total, 3.3B activated (keras-hub preset description)
    qwen = param_counts(catalog.model("qwen3-30b-a3b"))
    assert qwen.active == pytest.approx(3.3e9, rel=0.02)
    # DeepSeek-V2-Lite: 15.7B total, 2.4B activated per its model card; our count includes the
    # input embedding the card leaves out (2.66B with it)
    lite = param_counts(catalog.model("deepseek-v2-lite"))
    assert lite.active - lite.embedding == pytest.approx(2.4e9, rel=0.03)  # card rounds


def test_gemma3_counts_the_vision_tower_it_loads(catalog):
    gemma = catalog.model("gemma-3-4b")
    assert gemma.extra_params == 416_866_032 + 2_950_272  # SigLIP tower + projector
    assert param_counts(gemma).total == 4_300_079_472
