"""Catalog loading, validation with file/line/key errors, name resolution and overlays."""

from __future__ import annotations

import textwrap

import pytest

from infersize.catalog import load_catalog
from infersize.errors import CatalogError, UnknownNameError


def test_builtin_catalog_sizes(catalog):
    assert len(catalog.models.records) >= 31
    assert len(catalog.gpus.records) >= 20
    for fmt in (
        "fp32",
        "bf16",
        "fp16",
        "fp8",
        "int8",
        "int4",
        "nf4",
        "mxfp4",
        "nvfp4",
        "q8_0",
        "q6_k",
        "q5_k_m",
        "q4_k_m",
        "q4_0",
        "q3_k_m",
        "q2_k",
    ):
        catalog.weight_format(fmt)
    for kv in ("fp32", "fp16", "bf16", "fp8", "q8_0", "q4_0"):
        catalog.kv_dtype(kv)


def test_every_gpu_reports_less_than_its_marketing_memory(catalog):
    # "40 GB" of HBM is 40 GiB on the package; the driver and firmware keep part of it
    for gpu in catalog.gpus.records.values():
        assert gpu.memory_bytes < gpu.marketed_memory_gb * 2**30, gpu.id
        assert gpu.memory_source


@pytest.mark.parametrize(
    ("alias", "gpu_id"),
    [
        ("a100", "a100-80gb-sxm"),
        ("h100", "h100-sxm"),
        ("H200", "h200-sxm"),
        ("4090", "rtx-4090"),
        ("l40s", "l40s"),
        ("v100", "v100-16gb"),
    ],
)
def test_gpu_aliases(catalog, alias, gpu_id):
    assert catalog.gpu(alias).id == gpu_id


def test_models_resolve_by_hf_repo_case_insensitively(catalog):
    assert catalog.model("Qwen/Qwen2.5-7B").id == "qwen2.5-7b"
    assert catalog.model("QWEN2.5-7B").id == "qwen2.5-7b"


def test_unknown_name_suggests_near_names(catalog):
    with pytest.raises(UnknownNameError, match=r"did you mean 'llama-3\.1-8b'"):
        catalog.model("llama-3.1-8")


def test_head_dim_is_never_derived_where_the_config_sets_it(catalog):
    # Qwen3-32B: 64 heads x 128 = 8192 != hidden 5120; Llama-3.2-1B: head_dim 64
    assert catalog.model("qwen3-32b").head_dim_resolved == 128
    assert catalog.model("llama-3.2-1b").head_dim_resolved == 64
    assert catalog.model("llama-3.1-8b").head_dim_resolved == 4096 // 32


def write(tmp_path, text):
    path = tmp_path / "overlay.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_overlay_adds_a_gpu_and_replaces_a_price(tmp_path):
    path = write(
        tmp_path,
        """\
        gpus:
          - id: my-h100
            name: Our H100 (reserved)
            aliases: [ours]
            memory_bytes: 85027438592
            memory_source: torch total_memory on our nodes
            bandwidth_gb_per_s: 3350
            fp16_tflops: 989.4
            price_usd_per_hour: 1.10
        """,
    )
    catalog = load_catalog((path,))
    assert catalog.gpu("ours").price_usd_per_hour == 1.10
    assert catalog.gpu("h100").id == "h100-sxm"  # built-ins still there


def test_overlay_misspelt_key_names_file_line_and_key(tmp_path):
    path = write(
        tmp_path,
        """\
        models:
          - id: tiny
            hf_repo: me/tiny
            family: tiny
            tokenizer_family: llama2
            architecture: llama
            hidden_size: 64
            intermediat_size: 256
        """,
    )
    with pytest.raises(CatalogError) as err:
        load_catalog((path,))
    assert str(err.value) == f"{path}: line 8: key 'models.0.intermediat_size': unknown key"


def test_overlay_wrong_type_and_missing_key(tmp_path):
    path = write(
        tmp_path,
        """\
        gpus:
          - id: x
            name: X
            memory_bytes: lots
            memory_source: guess
            bandwidth_gb_per_s: 100
            fp16_tflops: 10
        """,
    )
    with pytest.raises(
        CatalogError,
        match=r"line 4: key 'gpus.0.memory_bytes': Input should be a "
        r"valid integer",
    ):
        load_catalog((path,))
    path = write(tmp_path, "gpus:\n  - id: x\n    name: X\n")
    with pytest.raises(
        CatalogError,
        match=r"line 2: key 'gpus.0.memory_bytes': required key is "
        r"missing",
    ):
        load_catalog((path,))


def test_overlay_not_yaml_or_not_a_mapping(tmp_path):
    bad = write(tmp_path, "gpus: [\n")
    with pytest.raises(CatalogError, match=r"overlay.yaml: line \d+: invalid YAML"):
        load_catalog((bad,))
    listy = write(tmp_path, "- 1\n- 2\n")
    with pytest.raises(CatalogError, match="expected a mapping"):
        load_catalog((listy,))
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(CatalogError, match="not a text file"):
        load_catalog((binary,))


def test_overlay_alias_clash_is_refused(tmp_path):
    path = write(
        tmp_path,
        """\
        kv_dtypes:
          - id: fp6
            bytes_per_element: 0.75
            aliases: [fp8]
        """,
    )
    with pytest.raises(CatalogError, match="name 'fp8' is already used by 'fp8'"):
        load_catalog((path,))


def test_inconsistent_architecture_is_refused(tmp_path):
    path = write(
        tmp_path,
        """\
        models:
          - id: odd
            hf_repo: me/odd
            family: odd
            tokenizer_family: odd
            architecture: llama
            hidden_size: 64
            intermediate_size: 256
            num_hidden_layers: 2
            num_attention_heads: 6
            num_key_value_heads: 4
            vocab_size: 100
            tie_word_embeddings: true
            max_position_embeddings: 128
        """,
    )
    with pytest.raises(CatalogError, match="multiple of num_key_value_heads"):
        load_catalog((path,))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("mamba_ssm_dtype: bfloat16", "mamba_ssm_dtype needs linear_attention_layers"),
        ("mamba_ssm_dtype: float8", "mamba_ssm_dtype"),  # not a dtype SGLang takes
    ],
)
def test_a_state_dtype_without_linear_attention_or_sglangs_names_is_refused(
    tmp_path, extra, message
):
    """A recurrent state's dtype belongs to a model with linear-attention layers, and is one
    SGLang names (float32, bfloat16, float16): a typo in a catalog fails at load."""
    path = write(
        tmp_path,
        f"""\
        models:
          - id: plain
            hf_repo: me/plain
            family: plain
            tokenizer_family: plain
            architecture: llama
            hidden_size: 64
            intermediate_size: 256
            num_hidden_layers: 2
            num_attention_heads: 4
            num_key_value_heads: 4
            vocab_size: 100
            tie_word_embeddings: true
            max_position_embeddings: 128
            {extra}
        """,
    )
    with pytest.raises(CatalogError, match=message):
        load_catalog((path,))
