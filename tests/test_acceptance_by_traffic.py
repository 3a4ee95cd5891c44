"""Acceptance true to the traffic: every published figure names the kind of traffic it was
measured on (a registry name, or none), n-gram lookup takes α only from n-gram figures on the
workload's kind and says which kinds it has, and a pair with figures on several kinds takes the
kind's when asked and all of them otherwise."""

from __future__ import annotations

import json
import textwrap

import pytest

from infersize.catalog import load_catalog
from infersize.catalog.workload_kinds import WORKLOAD_KINDS
from infersize.cli import app
from infersize.errors import CatalogError
from infersize.service.acceptance import pair_acceptance

CATALOG = load_catalog()
NGRAM = [r for r in CATALOG.published_acceptance if r.method == "ngram"]
NGRAM_KINDS = "chat, code-editing, math, mixed, summarization"  # the kinds n-gram rows are on
SPEC = ["spec", "--target", "llama-3.1-8b", "--draft", "ngram", "--gpu", "h100"]


def chain_alpha(e: float, k: int) -> float:
    """The α at which a chain of K drafts emits E tokens per verification step: Leviathan,
    Kalman & Matias (ICML 2023, arXiv 2211.17192) eq. 1, E = (1 − α^(K+1)) / (1 − α), increasing
    in α, inverted by bisection."""
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        if sum(mid**i for i in range(k + 1)) < e:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def test_every_row_names_a_registry_kind_or_none():
    kinds = {r.workload_kind for r in CATALOG.published_acceptance}
    assert kinds - {None} <= set(WORKLOAD_KINDS)
    # every n-gram figure says its kind: without one it could speak for no workload
    assert all(r.workload_kind for r in NGRAM)
    assert ", ".join(sorted({r.workload_kind for r in NGRAM if r.workload_kind})) == NGRAM_KINDS


def test_a_kind_outside_the_registry_is_refused_in_one_line(tmp_path):
    path = tmp_path / "overlay.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            published_acceptance:
              - target: My-8B
                target_params_b: 8.0
                draft: n-gram prompt lookup
                draft_params_b: null
                method: ngram
                dataset: our support tickets
                temperature: '0'
                draft_k: '3'
                engine: vLLM
                metric: mean acceptance length
                value: '1.9'
                alpha: 0.5
                conversion: alpha inverts E(alpha, 3) = 1.9
                trust: ours
                use_for_fit: false
                why_not_fitted: n-gram lookup
                source: our logs
                workload_kind: coding
            """
        )
    )
    with pytest.raises(CatalogError) as err:
        load_catalog((path,))
    names = [f"'{k}'" for k in WORKLOAD_KINDS]
    expected = ", ".join(names[:-1]) + " or " + names[-1]
    assert str(err.value) == (
        f"{path}: line 19: key 'published_acceptance.0.workload_kind': Input should be {expected}"
    )
    assert "\n" not in str(err.value)


def test_each_ngram_alpha_is_a_chains_at_its_k():
    """α of a profiled row inverts E(α, K) at K = its profile's length, with E = 1 + Σ r_i
    (vLLM's mean acceptance length: 1 + accepted / steps, tests/v1/spec_decode/
    test_acceptance_length.py, each r_i the share of steps whose i-th draft was accepted). Rows
    without a profile (Spec-Bench's PLD, which drafts at most 10 tokens) invert their published
    mean accepted tokens at K = 10."""
    profiled = [r for r in NGRAM if r.per_position]
    assert len(profiled) == 9
    for row in NGRAM:
        assert row.draft_id == "ngram" and row.draft_params_b is None and not row.use_for_fit
        if row.per_position:
            k = len(row.per_position)
            assert row.draft_k == str(k), row.source
            e = 1 + sum(row.per_position)
        else:
            assert row.workload_kind == "mixed" and row.draft_k.startswith("10 at most")
            k, e = 10, float(row.value)
        assert chain_alpha(e, k) == pytest.approx(row.alpha, abs=1e-3), (row.dataset, k)


def test_ngram_acceptance_comes_in_bursts():
    """On the same traces the chain α rises with K: after an accepted draft the next is likely
    accepted too, so i.i.d. α understates the later positions."""
    traced = {}
    for row in NGRAM:
        if "SpecDecode-Bench" in row.source:
            traced.setdefault(row.workload_kind, {})[int(row.draft_k)] = row.alpha
    assert set(traced) == {"chat", "summarization", "math", "code-editing"}
    assert all(by_k[5] > by_k[3] for by_k in traced.values())
    # code editing copies its prompt: n-gram accepts most there, least on math
    assert max(traced, key=lambda k: traced[k][3]) == "code-editing"
    assert min(traced, key=lambda k: traced[k][3]) == "math"


def test_ngram_on_chat_takes_the_chat_figures(runner):
    chat = [r.alpha for r in NGRAM if r.workload_kind == "chat"]
    assert len(chat) == 2
    known = pair_acceptance(CATALOG.model("llama-3.1-8b"), CATALOG.model("ngram"), CATALOG, "chat")
    assert known.expected == pytest.approx(sum(chat) / len(chat), abs=1e-4)
    assert (known.low, known.high) == (min(chat), max(chat))
    assert known.positions == 5  # the longest chain the chat figures were measured at
    result = runner.invoke(app, [*SPEC, "--workload-kind", "chat", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["acceptance_rate"] == pytest.approx(known.expected, abs=1e-4)
    note = data["notes"][0]
    assert note.startswith(
        f"α {known.expected:.3f} is the mean of 2 published n-gram figure(s) on chat traffic ("
    )
    # the chat measurement: the study's ShareGPT trace, and the study
    assert "data/llama3.1-8B/combined_sharegpt.jsonl" in note and "arXiv 2601.11580" in note
    assert "combined_instructcoder" not in note and "pull/24344" not in note


def test_ngram_on_a_kind_nobody_published_names_the_kinds_that_are(runner):
    result = runner.invoke(app, [*SPEC, "--workload-kind", "code"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: no published n-gram acceptance on code traffic in the catalog (only on "
        f"{NGRAM_KINDS}): give --acceptance-rate for llama-3.1-8b with ngram\n"
    )
    assert result.stdout == ""


def test_ngram_without_a_kind_asks_for_one(runner):
    result = runner.invoke(app, SPEC)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: n-gram acceptance depends on how much the output repeats the prompt: give "
        f"--workload-kind (published for {NGRAM_KINDS}) or --acceptance-rate for llama-3.1-8b "
        "with ngram\n"
    )
    assert result.stdout == ""


def test_a_head_with_figures_on_several_kinds_takes_the_kinds(runner):
    target, head = CATALOG.model("llama-3.1-8b"), CATALOG.model("eagle3-llama3.1-8b")
    rows = [
        r
        for r in CATALOG.published_acceptance
        if r.use_for_fit and (r.target_id, r.draft_id) == (target.id, head.id)
    ]
    by_kind = {r.workload_kind: r.alpha for r in rows}
    assert set(by_kind) == {"chat", "code", "math"} and len(rows) == 3
    everything = pair_acceptance(target, head, CATALOG)
    assert everything.expected == pytest.approx(sum(by_kind.values()) / 3, abs=1e-4)
    assert "the mean of 3 published figure(s) for this pair (" in everything.detail
    for kind, alpha in by_kind.items():
        known = pair_acceptance(target, head, CATALOG, kind)
        assert (known.low, known.expected, known.high) == (alpha, alpha, alpha)
        assert f"for this pair on {kind} traffic" in known.detail
    # code accepts more than chat on this head, as on EAGLE-3 heads generally
    assert by_kind["code"] > by_kind["chat"]
    # no figure on QA: every kind's, and the note says so
    qa = pair_acceptance(target, head, CATALOG, "qa")
    assert qa.expected == everything.expected
    assert "(none on qa traffic: every kind's)" in qa.detail
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            "llama-3.1-8b",
            "--method",
            "eagle3",
            "--gpu",
            "h100",
            "--workload-kind",
            "code",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["acceptance_rate"] == pytest.approx(by_kind["code"])


def test_a_head_without_figures_takes_its_methods_on_the_kind():
    """The catalog's 70B head has no fitted figure of its own: it takes the fitted EAGLE-3
    figures, those on the workload's kind where there are any."""
    target, head = CATALOG.model("llama-3.3-70b"), CATALOG.model("eagle3-llama3.3-70b")
    fitted = [r for r in CATALOG.published_acceptance if r.method == "eagle3" and r.use_for_fit]
    code = [r.alpha for r in fitted if r.workload_kind == "code"]
    known = pair_acceptance(target, head, CATALOG, "code")
    assert known.source == "method" and code
    assert known.expected == pytest.approx(sum(code) / len(code), abs=1e-4)
    anyway = pair_acceptance(target, head, CATALOG)
    assert anyway.expected == pytest.approx(sum(r.alpha for r in fitted) / len(fitted), abs=1e-4)
