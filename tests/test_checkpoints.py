"""Real model inputs: checkpoints written inside the tests (safetensors with the safetensors
package, GGUF with the gguf package's writer, config.json files) and read through the same code
paths users hit (`infersize spec --target ./folder`, `models show FILE.gguf`, `hf:ORG/NAME`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infersize.catalog.checkpoint import load_folder, read_safetensors_header
from infersize.catalog.gguf_file import load_gguf
from infersize.catalog.hfconfig import CheckpointError
from infersize.cli import app
from infersize.core.params import param_counts
from tests.support.checkpoints import TINY, llama_tensors, write_folder, write_gguf


def test_local_folder_counts_and_bytes_are_exact(tmp_path):
    tensors = llama_tensors(TINY)
    folder = write_folder(tmp_path / "tiny-llama", TINY, tensors)
    point = load_folder(folder)
    elements = sum(t.size for t in tensors.values())
    assert param_counts(point.model).total == elements == point.params_in_files
    assert point.weights.total == sum(t.nbytes for t in tensors.values())
    assert point.precision == "fp16"


def test_sharded_folder_reads_every_shard(tmp_path):
    tensors = llama_tensors(TINY)
    folder = write_folder(tmp_path / "sharded", TINY, tensors, shards=3)
    assert load_folder(folder).weights.total == sum(t.nbytes for t in tensors.values())


def test_spec_on_a_folder_uses_the_exact_bytes(runner, tmp_path):
    tensors = llama_tensors(TINY)
    folder = write_folder(tmp_path / "tiny-llama", TINY, tensors)
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            str(folder),
            "--draft",
            "none",
            "--gpu",
            "l4",
            "--context-length",
            "256",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    target = json.loads(result.stdout)["target"]
    assert target["weights_bytes"] == sum(t.nbytes for t in tensors.values())
    assert target["weights_from_files"] is True and target["quant"] == "fp16"
    # another precision than the checkpoint's: the formula, from the config's counts
    other = runner.invoke(
        app,
        [
            "spec",
            "--target",
            str(folder),
            "--target-quant",
            "int8",
            "--draft",
            "none",
            "--gpu",
            "l4",
            "--json",
        ],
    )
    assert json.loads(other.stdout)["target"]["weights_from_files"] is False


def test_tied_checkpoint_with_a_stored_lm_head_loads_one_copy(tmp_path):
    # Qwen3-0.6B stores lm_head.weight although its embeddings are tied (its model.safetensors
    # lists lm_head.weight first: IDX_Q3_06B in configs/models.yaml)
    config = {**TINY, "tie_word_embeddings": True}
    tensors = llama_tensors(config)
    point = load_folder(write_folder(tmp_path / "tied", config, tensors))
    assert point.weights.lm_head == 0
    assert (
        point.weights.total
        == sum(t.nbytes for t in tensors.values()) - tensors["lm_head.weight"].nbytes
    )


def test_gptq_quantization_config_is_read(tmp_path):
    config = {**TINY, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
    tensors = {
        "model.embed_tokens.weight": np.zeros((96, 64), np.float16),
        "model.layers.0.self_attn.q_proj.qweight": np.zeros((8, 64), np.int32),
        "model.layers.0.self_attn.q_proj.scales": np.zeros((1, 64), np.float16),
    }
    point = load_folder(write_folder(tmp_path / "gptq", config, tensors))
    assert point.precision == "int4"
    assert point.weights.linear == 8 * 64 * 4 + 64 * 2


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        ({"quant_method": "awq", "bits": 4}, "int4"),
        ({"quant_method": "fp8"}, "fp8"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "nf4"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
    ],
)
def test_quantization_methods(quant, expected):
    from infersize.catalog.checkpoint import precision_of

    assert precision_of({"quantization_config": quant}) == expected


def test_gguf_counts_and_bytes_are_exact(tmp_path, runner):
    path = tmp_path / "tiny-q8_0.gguf"
    sizes = write_gguf(path, TINY)
    point = load_gguf(path)
    elements = sum(t.size for t in llama_tensors(TINY).values())
    assert param_counts(point.model).total == elements == point.params_in_files
    assert point.weights.total == sum(sizes.values())
    assert point.precision == "q8_0"
    # Q8_0 is 34 bytes per 32 weights (ggml block_q8_0)
    assert sizes["blk.0.ffn_up.weight"] == 128 * 64 // 32 * 34
    shown = json.loads(runner.invoke(app, ["models", "show", str(path), "--json"]).stdout)
    assert shown["params"] == elements and shown["source"] == "GGUF file"
    spec = json.loads(
        runner.invoke(
            app, ["spec", "--target", str(path), "--draft", "none", "--gpu", "4090", "--json"]
        ).stdout
    )
    assert spec["target"]["weights_bytes"] == sum(sizes.values())


BAD_CONFIGS = [
    (
        "missing field",
        {k: v for k, v in TINY.items() if k != "num_hidden_layers"},
        "config.json: missing 'num_hidden_layers'",
    ),
    (
        "unknown architecture",
        {**TINY, "model_type": "mamba"},
        "config.json: unknown architecture 'mamba' (model_type); infersize knows ",
    ),
    (
        "inconsistent heads",
        {**TINY, "num_key_value_heads": 3},
        "num_attention_heads must be a multiple of num_key_value_heads",
    ),
]


@pytest.mark.parametrize(
    ("config", "message"), [b[1:] for b in BAD_CONFIGS], ids=[b[0] for b in BAD_CONFIGS]
)
def test_bad_configs_exit_2(runner, tmp_path, config, message):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    result = runner.invoke(
        app, ["spec", "--target", str(folder), "--draft", "none", "--gpu", "a100"]
    )
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_truncated_and_corrupt_checkpoints_exit_2(runner, tmp_path):
    tensors = llama_tensors(TINY)
    folder = write_folder(tmp_path / "cut", TINY, tensors)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated: tensor"):
        read_safetensors_header(folder / "model.safetensors")
    (folder / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    result = runner.invoke(
        app, ["spec", "--target", str(folder), "--draft", "none", "--gpu", "a100"]
    )
    assert result.exit_code == 2 and "corrupt or truncated safetensors header" in result.stderr
    (folder / "config.json").write_text("{not json")
    result = runner.invoke(app, ["models", "show", str(folder)])
    assert result.exit_code == 2 and result.stderr.endswith("config.json: not valid JSON\n")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\x00" * 20)
    result = runner.invoke(app, ["models", "show", str(junk)])
    assert result.exit_code == 2 and "not a readable GGUF file" in result.stderr
    result = runner.invoke(app, ["models", "show", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "nowhere: no such folder" in result.stderr


def test_cross_tokenizer_pair_is_refused_unless_asked(runner):
    args = ["spec", "--target", "qwen2.5-7b", "--draft", "llama-3.2-1b", "--gpu", "a100"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: draft llama-3.2-1b (llama3 tokenizer) does not share "
        "qwen2.5-7b's tokenizer (qwen2); add --allow-cross-tokenizer to "
        "size it anyway\n"
    )
    allowed = runner.invoke(app, [*args, "--allow-cross-tokenizer", "--json"])
    assert allowed.exit_code == 0
    assert any("drafts across tokenizers" in n for n in json.loads(allowed.stdout)["notes"])


def _hub_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf"),
        "INFERSIZE_CACHE_DIR": str(tmp_path / "infersize"),
    }
    code = "import sys; from infersize.cli import app; sys.argv[0] = 'infersize'; app()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_hub_id_without_network_is_a_clear_error(tmp_path):
    done = _hub_run(
        tmp_path, "spec", "--target", "hf:acme/tiny", "--draft", "none", "--gpu", "a100"
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error: cannot get acme/tiny config.json from the Hugging Face Hub ("
    )
    assert done.stderr.endswith(
        "use a local folder (the path to the model's files) or a catalog name\n"
    )


def test_hub_id_from_the_local_cache(tmp_path):
    # the Hub cache layout huggingface_hub reads offline: refs/main -> snapshots/<commit>/
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "models--acme--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(TINY))
    tensors = llama_tensors(TINY)
    headers = [
        {"name": n, "dtype": "F16", "shape": list(t.shape), "nbytes": t.nbytes}
        for n, t in tensors.items()
    ]
    cache = tmp_path / "infersize" / "hub" / "acme--tiny"
    cache.mkdir(parents=True)
    (cache / "main.json").write_text(json.dumps(headers))
    done = _hub_run(
        tmp_path, "spec", "--target", "hf:acme/tiny", "--draft", "none", "--gpu", "a100", "--json"
    )
    assert done.returncode == 0, done.stderr
    target = json.loads(done.stdout)["target"]
    assert target["weights_bytes"] == sum(t.nbytes for t in tensors.values())
    assert target["params"] == sum(t.size for t in tensors.values())
