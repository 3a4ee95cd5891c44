"""catalog/validation.py: records are dataclasses, validated by Pydantic models built from their
own declarations. What the Pydantic records refused before is still refused, with the same
words; and the record modules load without Pydantic."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from pydantic import ValidationError

from infersize.catalog.published import AcceptancePrior
from infersize.catalog.records import Gpu, Model, SupportGroup, WeightFormat
from infersize.catalog.validation import schema_of, validate_record

TINY = {
    "id": "tiny",
    "hf_repo": "example/tiny",
    "family": "llama",
    "tokenizer_family": "llama3",
    "architecture": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "tie_word_embeddings": True,
    "max_position_embeddings": 4096,
}


def first_error(schema: type, data: dict) -> tuple[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        validate_record(schema, data)
    error = caught.value.errors()[0]
    return tuple(error["loc"]), error["msg"]


def test_a_valid_entry_becomes_the_record_it_declares():
    model = validate_record(Model, TINY)
    assert type(model) is Model and model == Model(**TINY)
    assert model.aliases == [] and model.aliases is not Model(**TINY).aliases


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        ({"hidden_size": 0}, ("hidden_size",), "Input should be greater than 0"),
        ({"hidden_size": True}, ("hidden_size",), "Input should be a valid integer"),
        ({"hidden_size": "64"}, ("hidden_size",), "Input should be a valid integer"),
        (
            {"num_shared_experts": -1},
            ("num_shared_experts",),
            "Input should be greater than or equal to 0",
        ),
        (
            {"id": "a b"},
            ("id",),
            "String should match pattern '^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$'",
        ),
        (
            {"family": "llama\x1b[31m"},
            ("family",),
            "Value error, contains control characters (terminal escapes are not allowed)",
        ),
        (
            {"aliases": ["ok", "bad\x07"]},
            ("aliases",),
            "Value error, contains control characters (terminal escapes are not allowed)",
        ),
        ({"hidden_sise": 64}, ("hidden_sise",), "Extra inputs are not permitted"),
        (
            {"num_key_value_heads": 3},
            (),
            "Value error, num_attention_heads must be a multiple of num_key_value_heads",
        ),
        (
            {"speculator": "tree"},
            ("speculator",),
            "Input should be 'eagle', 'eagle3', 'mtp', 'medusa', 'mlp_speculator' or 'ngram'",
        ),
        ({"vision": {"hidden_size": 8}}, ("vision", "intermediate_size"), "Field required"),
    ],
)
def test_what_pydantic_refused_it_still_refuses(change, where, message):
    assert first_error(Model, {**TINY, **change}) == (where, message)


def test_floats_refuse_nan_and_infinity_and_check_their_bounds():
    gpu = {
        "id": "g",
        "name": "G",
        "memory_bytes": 1,
        "memory_source": "s",
        "bandwidth_gb_per_s": 1.0,
        "fp16_tflops": 1.0,
    }
    assert validate_record(Gpu, gpu).bandwidth_bytes_per_s == 1e9
    for bad in (math.nan, math.inf):
        assert first_error(Gpu, {**gpu, "fp16_tflops": bad})[1].startswith(
            "Input should be a finite number"
        )
    assert first_error(Gpu, {**gpu, "fp16_tflops": 0.0}) == (
        ("fp16_tflops",),
        "Input should be greater than 0",
    )
    fmt = {
        "id": "w",
        "name": "W",
        "linear_bits_per_weight": 33.0,
        "embedding_bits": 16.0,
        "lm_head_bits": 16.0,
        "norm_bits": 16.0,
        "compute_dtype": "bf16",
        "exact": True,
    }
    assert first_error(WeightFormat, fmt) == (
        ("linear_bits_per_weight",),
        "Input should be less than or equal to 32",
    )


def test_support_groups_are_read_under_their_yaml_key():
    group = validate_record(SupportGroup, {"class": "native", "archs": ["hopper"], "reason": "r"})
    assert group.level == "native" and group.archs == ["hopper"]
    assert first_error(SupportGroup, {"class": "native", "archs": [], "reason": "r"}) == (
        ("archs",),
        "List should have at least 1 item after validation, not 0",
    )


def test_bounds_on_integers_beyond_positivity():
    prior = {
        "formula": "f",
        "intercept": 0.5,
        "slope": 0.1,
        "alpha_min": 0.2,
        "alpha_max": 0.9,
        "rmse": 0.07,
        "max_abs_error": 0.1,
        "pairs_fitted": 1,
        "fitted_by": "x",
    }
    assert first_error(AcceptancePrior, prior) == (
        ("pairs_fitted",),
        "Input should be greater than or equal to 2",
    )
    assert schema_of(AcceptancePrior) is schema_of(AcceptancePrior)  # built once


def test_records_load_without_pydantic():
    code = (
        "import sys\nimport infersize.catalog.store, infersize.catalog.published\n"
        "print('pydantic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
