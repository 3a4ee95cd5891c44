"""Logs as users save them (UTF-8 with a byte-order mark, UTF-16 from Windows PowerShell's
`>`), a draft at least as big as its target, and the n-gram acceptance of the shipped sweeps, taken
from their traffic's kind."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from infersize.cli import app
from infersize.files import decode_text

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "speclogs"
NGRAM_LOG = LOGS / "vllm_v1_ngram_qwen3-32b-fp8_k3_issue19254.txt"
ENCODINGS = {
    "utf-8 with BOM": lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
    "utf-16 le": lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    "utf-16 be": lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    "utf-32 le": lambda text: codecs.BOM_UTF32_LE + text.encode("utf-32-le"),
}
# every log reader of `infersize alpha`, with a file it reads
READERS = [
    ("--from-vllm-log", "vllm_v1_ngram_qwen3-32b-fp8_k3_issue19254.txt"),
    ("--from-prometheus", "vllm_v1_prometheus_constructed_dp2_k3.txt"),
    ("--from-llama-cpp-log", "llamacpp_server_eagle3_k3_pr24536.txt"),
]


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_decode_text_follows_the_byte_order_mark(encoding):
    text = "SpecDecoding metrics: Mean acceptance length: 2.16 — é\n"
    assert decode_text(ENCODINGS[encoding](text)) == text
    assert decode_text(text.encode("utf-8")) == text


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize(("flag", "name"), READERS)
def test_every_log_reader_reads_any_encoding(runner, tmp_path, encoding, flag, name):
    text = (LOGS / name).read_text(encoding="utf-8")
    saved = tmp_path / "saved.log"
    saved.write_bytes(ENCODINGS[encoding](text))
    plain = runner.invoke(app, ["alpha", flag, str(LOGS / name), "--json"])
    encoded = runner.invoke(app, ["alpha", flag, str(saved), "--json"])
    assert plain.exit_code == 0, plain.output
    assert encoded.exit_code == 0, encoded.output
    mine, theirs = json.loads(encoded.stdout), json.loads(plain.stdout)
    for data in (mine, theirs):
        data.pop("file", None)
    assert mine == theirs


def test_a_draft_at_least_as_big_as_its_target_is_warned_about(runner):
    args = ["spec", "--target", "llama-3.2-1b", "--draft", "llama-3.1-8b", "--gpu", "h100"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        "warning: draft llama-3.1-8b (8.03 B parameters) is at least as big as its target "
        "llama-3.2-1b (1.24 B): a draft pays only when a pass costs much less than the target's"
    ) in result.output
    same = runner.invoke(app, [*args[:2], "llama-3.1-8b", *args[3:], "--json"])
    assert json.loads(same.stdout)["notes"][0].startswith(
        "warning: draft llama-3.1-8b (8.03 B parameters) is at least as big as its target "
        "llama-3.1-8b (8.03 B)"
    )
    smaller = runner.invoke(app, [*args[:2], "llama-3.1-8b", "--draft", "llama-3.2-1b", *args[5:]])
    assert "warning:" not in smaller.output


def test_the_shipped_sweeps_take_ngram_acceptance_from_their_traffic():
    """sweeps/methods.yaml and sweeps/capacity.yaml declare chat traffic: their n-gram pairs
    take the catalog's n-gram figures measured on chat (lowest, mean, highest), and the
    capacity sweep's RAG workload those measured on summarization."""
    from infersize.catalog.store import load_catalog
    from infersize.sweep.config import load_sweep
    from infersize.sweep.plan import build_plan

    rows = load_catalog().published_acceptance

    def scenarios(kind: str) -> tuple[float, ...]:
        alphas = [r.alpha for r in rows if r.method == "ngram" and r.workload_kind == kind]
        return (min(alphas), round(sum(alphas) / len(alphas), 4), max(alphas))

    for name in ("methods", "capacity"):
        plan = build_plan(*load_sweep(ROOT / "sweeps" / f"{name}.yaml"))
        ngram = [s for s in plan.settings if s.method == "ngram"]
        assert ngram and all(s.alphas == scenarios("chat") for s in ngram)
    assert all(
        s.alpha_on("summarization", i) == scenarios("summarization")[i]
        for s in ngram
        for i in range(3)
    )
