"""Speculative methods: the heads' parameter counts from their real structure, their
KV cache and draft step as vLLM runs them, and --method on the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from infersize.catalog import load_catalog
from infersize.catalog.records import Model
from infersize.catalog.sources import resolve_model
from infersize.cli import app
from infersize.core.engines import get_engine
from infersize.core.memory import kv_layout
from infersize.core.methods import METHODS, method_of
from infersize.core.params import checkpoint_params, param_counts
from infersize.service.resolve import DeploymentRequest, resolve_deployment

CATALOG = load_catalog()
FP16 = CATALOG.kv_dtype("fp16")


def test_eagle3_head_for_llama_3_1_8b_counts_its_tensors():
    """yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, from its config (hidden 4096, MLP 14336, 32/8
    heads, draft vocabulary 32,000) and the EAGLE-3 module (SafeAILab/EAGLE traineagle3
    cnets.py): fc 4096x12288, q 8192->4096, k and v 8192->1024, o, the gated MLP, four norms,
    lm_head 32000x4096; plus d2t (32,000 int64), which vLLM loads."""
    counts = param_counts(CATALOG.model("eagle3-llama3.1-8b"))
    tensors = {
        "fc": 4096 * 12288,
        "q_proj": 8192 * 4096,
        "k_proj": 8192 * 1024,
        "v_proj": 8192 * 1024,
        "o_proj": 4096 * 4096,
        "mlp": 3 * 14336 * 4096,
        "norms": 4 * 4096,
        "lm_head": 32000 * 4096,
    }
    assert sum(tensors.values()) == 424_689_664
    assert counts.total == 424_689_664 + 32_000
    assert counts.embedding == 0 and counts.lm_head == 32000 * 4096
    # The published pytorch_model.bin is "about 810 MB, 15 tensors" (a test against the real
    # file; no safetensors total exists): fp16 weights, int64 d2t and the bool t2d mask.
    file_bytes = 2 * 424_689_664 + 8 * 32_000 + 128_256
    assert file_bytes == 849_763_584 and round(file_bytes / 2**20) == 810


def _fp8_block_scales(model: Model, layers: range) -> int:
    """128x128 block scales (scale_inv) of every FP8 matrix of the given DeepSeek-V3 layers:
    MLA projections and the experts (dense MLP in the first three layers); eh_proj, the
    router, the embedding and the head stay bf16."""

    def blocks(rows: int, cols: int) -> int:
        return math.ceil(rows / 128) * math.ceil(cols / 128)

    h, mla = model.hidden_size, model.mla
    assert mla is not None and model.q_lora_rank is not None
    n = model.num_attention_heads
    attention = (
        blocks(mla.q_lora_rank, h)
        + blocks(n * (mla.qk_nope_head_dim + mla.qk_rope_head_dim), mla.q_lora_rank)
        + blocks(mla.kv_lora_rank + mla.qk_rope_head_dim, h)
        + blocks(n * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank)
        + blocks(h, n * mla.v_head_dim)
    )
    moe = model.moe
    assert moe is not None
    dense = 3 * blocks(model.intermediate_size, h)
    expert = 3 * blocks(moe.expert_intermediate_size, h)
    routed_and_shared = (moe.num_experts + moe.num_shared_experts) * expert
    return sum(
        attention + (dense if i < moe.first_k_dense_replace else routed_and_shared) for i in layers
    )


def test_deepseek_v3_mtp_module_completes_the_hub_total():
    """DeepSeek-V3's Hub total, 684,531,386,000, is the main model (671,026,419,200, checkpoint
    audits) + the MTP module with its own embedding and head copies + the FP8 block scales of
    both (README_WEIGHTS.md: MTP 14B, 11.5B unique besides the shared embedding and head)."""
    main, mtp = CATALOG.model("deepseek-v3"), CATALOG.model("deepseek-v3-mtp")
    scales = _fp8_block_scales(main, range(61)) + _fp8_block_scales(mtp, range(3, 4))
    assert scales == 41_540_496
    assert param_counts(main).total + checkpoint_params(mtp) + scales == 684_531_386_000
    assert checkpoint_params(mtp) == 13_463_426_304
    # vLLM shares the target's embedding and lm_head with an MTP module and drops its copies
    assert param_counts(mtp).total == 13_463_426_304 - 2 * 129280 * 7168


def test_medusa_heads_count_a_residual_block_and_an_lm_head_each():
    """FasterDecoding/Medusa medusa_model.py: 5 heads, each ResBlock Linear(4096, 4096) with
    bias and its own lm_head 32000x4096 (the .pt file has no published total)."""
    assert param_counts(CATALOG.model("medusa-vicuna-7b-v1.3")).total == 5 * (
        4096 * 4096 + 4096 + 32000 * 4096
    )


def test_mlp_speculator_counts_vllms_stages():
    """vLLM model_executor/models/mlp_speculator.py, untied: per stage an embedding V x d_in,
    a projection (h -> d_in first, d_in -> d_in after), a LayerNorm with scale and shift and a
    head d_in x V; tied: one embedding, two projections, one norm, a head per stage."""
    fields = {
        "id": "spec",
        "hf_repo": "x/spec",
        "family": "llama-3",
        "tokenizer_family": "llama3",
        "architecture": "mlp_speculator",
        "hidden_size": 4096,
        "intermediate_size": 3072,
        "num_hidden_layers": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "speculator": "mlp_speculator",
        "speculator_heads": 3,
        "max_position_embeddings": 8192,
    }
    v, d = 128256, 3072
    untied = Model(**fields, tie_word_embeddings=False)
    assert param_counts(untied).total == (
        3 * v * d + (4096 * d + 2 * d * d) + 3 * d * v + 3 * 2 * d
    )
    tied = Model(**fields, tie_word_embeddings=True)
    assert param_counts(tied).total == v * d + (4096 * d + d * d) + 3 * d * v + 2 * d


@pytest.mark.parametrize(
    ("head", "bytes_per_token"),
    [
        ("eagle3-llama3.1-8b", 2 * 8 * 128 * 2),  # one layer, 8 KV heads of 128
        ("eagle-llama3.1-8b", 2 * 8 * 128 * 2),
        ("deepseek-v3-mtp", (512 + 64) * 2),  # one MLA layer: the latent and the rope key
        ("medusa-vicuna-7b-v1.3", 0),
        ("ngram", 0),
    ],
)
def test_heads_keep_the_kv_cache_vllm_allocates(head, bytes_per_token):
    assert kv_layout(CATALOG.model(head), FP16).bytes_per_token == bytes_per_token


def _deployment(target, draft):
    engine = get_engine("plain")
    dep = resolve_deployment(
        DeploymentRequest(target=target, gpu="h100", draft=draft), CATALOG, engine
    )
    return dep


def test_eagle1_draft_step_reads_the_targets_lm_head():
    """vLLM's EAGLE-1 head computes its logits with the target's lm_head: every draft pass
    streams those 128256 x 4096 bf16 bytes besides its own layer."""
    dep = _deployment("llama-3.1-8b", "eagle-llama3.1-8b")
    assert dep.draft is not None and dep.numbers.draft is not None
    own = dep.draft.numbers.cost.dense_bytes
    assert dep.numbers.draft.cost.dense_bytes - own == 128256 * 4096 * 2


def test_medusa_proposes_at_most_its_heads_in_one_pass(runner):
    args = ["--target", "vicuna-7b-v1.3", "--method", "medusa", "--gpu", "a100"]
    result = runner.invoke(app, ["spec", *args, "--acceptance-rate", "0.8", "--json"])
    data = json.loads(result.stdout)
    assert data["draft"]["model"] == "medusa-vicuna-7b-v1.3" and data["method"] == "medusa"
    assert data["optimal_k"] <= 5 and data["draft"]["kv_cache_bytes"] == 0


def test_ngram_has_no_weights_no_kv_and_no_gpu_time(runner):
    args = ["--target", "llama-3.1-8b", "--method", "ngram", "--gpu", "h100"]
    result = runner.invoke(app, ["spec", *args, "--acceptance-rate", "0.5", "--json"])
    data = json.loads(result.stdout)
    assert data["draft"]["total_bytes"] == 0 and data["latency_ratio"] is None
    assert (
        data["notes"][0]
        == "--method ngram: drafting with n-gram prompt lookup (no weights, on the CPU)"
    )


def test_method_without_draft_picks_the_published_head_and_says_which(runner):
    result = runner.invoke(
        app, ["spec", "--target", "llama-3.1-8b", "--method", "eagle3", "--gpu", "h100", "--json"]
    )
    data = json.loads(result.stdout)
    assert data["draft"]["model"] == "eagle3-llama3.1-8b"
    assert data["acceptance_source"] == "published"
    assert (
        "--method eagle3: drafting with eagle3-llama3.1-8b (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), "
        "the catalog's published drafter for llama-3.1-8b" in data["notes"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--target", "llama-3.1-8b", "--method", "mtp"],
            "error: no published mtp drafter for "
            "llama-3.1-8b in the catalog; the catalog has mtp drafters for deepseek-r1, "
            "deepseek-v3, deepseek-v3.1, deepseek-v3.2, glm-4.5, glm-4.5-air, glm-4.6, glm-4.7, "
            "glm-5, "
            "qwen3-next-80b-a3b, qwen3.5-0.8b, qwen3.5-122b-a10b, qwen3.5-27b, qwen3.5-35b-a3b, "
            "qwen3.5-397b-a17b, qwen3.5-4b, qwen3.5-9b; give --draft (a catalog id, a folder or "
            "hf:ID)\n",
        ),
        (
            ["--target", "llama-3.1-8b", "--method", "eagle3", "--draft", "llama-3.2-1b"],
            "error: llama-3.2-1b is a draft drafter, not eagle3: drop --method or give a matching "
            "--draft\n",
        ),
        (
            ["--target", "llama-3.1-8b"],
            "error: missing option '--draft' (a draft model, a head, or none; or give --method)\n",
        ),
        (
            ["--target", "llama-3.1-8b", "--draft", "ngram"],
            "error: n-gram acceptance depends on "
            "how much the output repeats the prompt: give --workload-kind (published for chat, "
            "code-editing, math, mixed, summarization) or --acceptance-rate for llama-3.1-8b with "
            "ngram\n",
        ),
        (
            ["--target", "llama-3.1-8b", "--method", "lookahead"],
            "error: unknown method 'lookahead'",
        ),
        (
            [
                "--target",
                "vicuna-7b-v1.3",
                "--method",
                "medusa",
                "--acceptance-rate",
                "0.7",
                "--draft-k",
                "6",
            ],
            "error: --draft-k must be at most 5: medusa-vicuna-7b-v1.3 "
            "proposes one token per head\n",
        ),
    ],
)
def test_method_mistakes_exit_2_with_one_line(runner, args, message):
    result = runner.invoke(app, ["spec", "--gpu", "h100", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1


def test_ngram_takes_a_per_position_profile(runner):
    """vLLM 0.9.0.1 n-gram log on Qwen3-32B-FP8, K=3 (vllm-project/vllm#19254):
    Per-position acceptance rate 0.543, 0.357, 0.264."""
    args = ["--target", "qwen2.5-7b", "--draft", "ngram", "--gpu", "h100", "--draft-k", "3"]
    result = runner.invoke(
        app, ["spec", *args, "--acceptance-rates", "0.543,0.357,0.264", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["expected_tokens_per_step"] == pytest.approx(2.164)


def test_every_method_names_a_drafter_kind():
    kinds = {m.speculator for m in METHODS.values()}
    assert kinds == {None, "eagle", "eagle3", "mtp", "medusa", "mlp_speculator", "ngram"}
    assert method_of(CATALOG.model("llama-3.2-1b")).name == "draft"


HEADS = Path(__file__).parent / "data" / "heads"


def _folder(tmp_path: Path, name: str, config: dict) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _draft(runner, target: str, folder: str, gpu: str = "h100", k: int = 4) -> dict:
    args = ["--target", target, "--draft", folder, "--gpu", gpu, "--draft-k", str(k)]
    result = runner.invoke(app, ["spec", *args, "--acceptance-rate", "0.7", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_eagle3_folder_is_read_as_a_head(runner, tmp_path):
    """The EAGLE-3 Llama-3.1-8B head's config (SafeAILab/EAGLE traineagle3/config.json): a
    Llama config with draft_vocab_size; counted as the catalog's entry is."""
    config = json.loads((HEADS / "eagle3-llama3.1-instruct-8b.json").read_text())["config"]
    data = _draft(runner, "llama-3.1-8b", _folder(tmp_path, "eagle3", config))
    assert data["method"] == "eagle3"
    assert data["draft"]["params"] == param_counts(CATALOG.model("eagle3-llama3.1-8b")).total
    assert data["draft"]["kv_cache_bytes"] > 0  # one layer of KV


def test_a_medusa_folder_is_read_as_heads(runner, tmp_path):
    """vLLM's MedusaConfig fields: medusa_num_heads, medusa_num_layers, medusa_fc_bias."""
    config = {
        "model_type": "medusa",
        "hidden_size": 4096,
        "vocab_size": 32000,
        "medusa_num_heads": 5,
        "medusa_num_layers": 1,
        "medusa_fc_bias": True,
    }
    data = _draft(runner, "vicuna-7b-v1.3", _folder(tmp_path, "medusa", config), "a100")
    assert data["method"] == "medusa" and data["draft"]["kv_cache_bytes"] == 0
    assert data["draft"]["params"] == 739_266_560  # as the catalog's medusa-vicuna-7b-v1.3


def test_an_mlp_speculator_folder_is_read_as_stages(runner, tmp_path):
    """vLLM's MLPSpeculatorConfig fields: emb_dim, inner_dim, n_predict, tie_weights."""
    config = {
        "model_type": "mlp_speculator",
        "emb_dim": 4096,
        "inner_dim": 3072,
        "n_predict": 3,
        "vocab_size": 128256,
        "tie_weights": False,
    }
    data = _draft(runner, "llama-3.1-8b", _folder(tmp_path, "mlp", config), k=3)
    assert data["method"] == "mlp-speculator" and data["optimal_k"] <= 3
    v, d = 128256, 3072
    assert data["draft"]["params"] == 3 * v * d + 4096 * d + 2 * d * d + 3 * d * v + 3 * 2 * d


def test_a_head_of_another_width_is_refused(runner, tmp_path):
    config = json.loads((HEADS / "eagle3-llama3.1-instruct-8b.json").read_text())["config"]
    folder = _folder(tmp_path, "eagle3", config)
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            "llama-3.3-70b",
            "--draft",
            folder,
            "--gpu",
            "h100",
            "--acceptance-rate",
            "0.7",
        ],
    )
    assert result.exit_code == 2
    assert "does not fit llama-3.3-70b (hidden 8192, vocabulary 128256)" in result.stderr


@pytest.mark.parametrize("target", ["qwen3-next-80b-a3b", "glm-4.5", "glm-4.5-air"])
def test_mtp_drafters_are_the_modules_in_their_checkpoints(target):
    """The MTP drafter of Qwen3-Next and GLM-4.5(-Air) holds exactly the MTP part of its
    target's checkpoint (whose main model + MTP part equals the Hub total:
    tests/test_hub_configs_count_and_lay_out_kv.py), its embedding and head copies aside (vLLM
    shares the target's)."""
    head, main = CATALOG.model(f"{target}-mtp"), CATALOG.model(target)
    assert head.speculator == "mtp" and head.speculator_for == [target]
    assert checkpoint_params(head) == param_counts(main).mtp
    assert kv_layout(head, FP16).bytes_per_token == 2 * head.num_key_value_heads * 128 * 2 * (
        2 if target.startswith("qwen3") else 1
    )  # one full-attention layer: Qwen3-Next's heads are 256 wide, GLM's 128


def test_a_specforge_eagle3_head_matches_its_cards_parameter_figure(runner, tmp_path):
    """thomaskiefer/EAGLE3-Apertus-8B-Instruct-2509 (model card: LlamaForCausalLMEagle3,
    hidden 4096, MLP 21504, 32/8 heads, 1 layer, vocabulary 131,072, draft vocabulary 32,000,
    bf16, "Parameters ~513M"): counted from those fields, 512,802,048, which the card rounds to
    513M (it would be 1.05 B with an embedding of its own, which EAGLE-3 heads do not ship)."""
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 21504,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 1,
        "vocab_size": 131072,
        "draft_vocab_size": 32000,
        "torch_dtype": "bfloat16",
    }
    head = resolve_model(_folder(tmp_path, "apertus-eagle3", config), CATALOG).model
    total = param_counts(head).total
    assert total == 512_802_048 and round(total / 1e6) == 513
