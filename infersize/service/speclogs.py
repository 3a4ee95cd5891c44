"""Acceptance measured by a running engine, read from what it prints: vLLM's spec-decode log lines
(V1 per interval, V0 cumulative), a vLLM `/metrics` scrape, llama-server's speculative statistics.
Parsed into counts, aggregated over the whole file, then turned into α, the per-position profile
and the mean acceptance length with infersize's own maths (core.profile, core.acceptance).

Counting as vLLM V1 does (vllm/v1/spec_decode/metrics.py): a draft is one verification step that
carried draft tokens; `accepted` counts the accepted prefix; the mean acceptance length is
E = 1 + accepted / drafts; r_i is the share of drafts whose i-th token was accepted. V1 resets its
counters after every log line, so lines are summed; V0 and Prometheus counters are cumulative.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from infersize.core.acceptance import AcceptanceMetrics, convert
from infersize.core.evaluate import MAX_K
from infersize.core.profile import conditional_rates, profile_problem
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, ValueRangeError
from infersize.files import InputFileError, decode_text, read_input
from infersize.record import record
from infersize.service import logparse as lp
from infersize.service.llamacpp_log import parse_llama_cpp_log
from infersize.service.logparse import Interval

SOURCES = ("vllm-log", "prometheus", "llama-cpp-log")
MAX_LOG_BYTES = 512 * 2**20  # server logs grow; still read whole, so bounded


@record
class MeasuredAcceptance:
    source: str
    path: str
    draft_k: int
    intervals: int
    accepted_tokens: float
    drafted_tokens: float
    drafts: float
    mean_acceptance_length: float
    per_position: tuple[float, ...]  # empty when the source has no per-position counts
    conditional: tuple[float, ...]
    metrics: AcceptanceMetrics  # α (i.i.d.) with the same mean length at K, and its siblings
    notes: tuple[str, ...]

    @property
    def measured_vllm_acceptance_rate(self) -> float:
        """accepted / drafted, vLLM V1's "Draft acceptance rate" over the whole file."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    def spec_flags(self) -> str:
        """What to paste after `infersize spec --target … --draft … --gpu …` (with --max-k
        when K is past spec's default search)."""
        flags = f"--draft-k {self.draft_k}"
        if self.draft_k > DEFAULTS.max_k:
            flags += f" --max-k {self.draft_k}"
        if self.per_position:
            rates = ",".join(f"{r:.4g}" for r in self.per_position)
            return f"{flags} --acceptance-rates {rates}"
        return f"{flags} --acceptance-rate {self.metrics.acceptance_rate:.4g}"


def _text(path: Path) -> str:
    try:
        return decode_text(read_input(path, MAX_LOG_BYTES))
    except InputFileError as exc:
        raise InfersizeError(str(exc)) from None


# vLLM V1: the field order changed between releases (0.9.x rate first; 0.11+ mean length
# first, throughputs, "Avg Draft acceptance rate" last), so each field is found on its own.
_V1 = "SpecDecoding metrics: "
_V0 = "Speculative metrics: "
_V0_FIELDS = ("speculative tokens", "accepted tokens", "draft tokens", "emitted tokens")


def _v1_interval(line: str, body: int, where: str) -> Interval | None:
    """The counts of a V1 line whose fields begin at line[body:]; None without them."""
    accepted, drafted = lp.after(line, "Accepted: ", body), lp.after(line, "Drafted: ", body)
    if accepted < 0 or drafted < 0:
        return None
    got = lp.count_at(line, accepted, "Accepted", where)
    sent = lp.count_at(line, drafted, "Drafted", where)
    lp.check_accepted(got, sent, where)
    rates = lp.after(line, "Per-position acceptance rate: ", body)
    per_pos = lp.rates_at(line, rates, where) if rates >= 0 else None
    k = None if per_pos is None else len(per_pos)
    return Interval(k=k, accepted=got, drafted=sent, drafts=None, rates=per_pos)


def _v0_row(line: str, body: int, where: str) -> tuple[int, int, int, int] | None:
    found = [lp.after(line, f"Number of {name}: ", body) for name in _V0_FIELDS]
    if min(found) < 0:
        return None
    k, accepted, draft, emitted = (
        lp.count_at(line, at, f"number of {name}", where)
        for at, name in zip(found, _V0_FIELDS, strict=True)
    )
    if not 1 <= k <= MAX_K:
        raise InfersizeError(f"{where}: {k} speculative tokens: K must be in 1..{MAX_K}")
    lp.check_accepted(accepted, draft, where)
    if not draft / k <= emitted <= draft / k * (k + 1):
        raise InfersizeError(
            f"{where}: {emitted} emitted tokens for {draft} draft tokens at K={k}: each draft "
            "emits 1 to K+1 tokens"
        )
    return k, accepted, draft, emitted


def _v0_runs(rows: list[tuple[int, int, int, int]]) -> list[Interval]:
    """V0 counters are cumulative since the server started: the last line of each run covers
    it (a counter going down starts a new run). Accepted here is emitted − drafts (the prefix;
    V0's own "accepted tokens" also counts tokens accepted after a rejection)."""
    out: list[Interval] = []
    for i, (k, _, draft, emitted) in enumerate(rows):
        after = rows[i + 1] if i + 1 < len(rows) else None
        if after is None or after[0] != k or after[2] < draft:
            drafts = draft / k
            got = emitted - drafts
            out.append(Interval(k=k, accepted=got, drafted=draft, drafts=drafts, rates=None))
    return out


def parse_vllm_log(text: str, path: str) -> tuple[list[Interval], list[str]]:
    """V1 `SpecDecoding metrics:` lines (one interval each) and V0 `Speculative metrics:`
    lines (cumulative), whatever logger prefix they carry."""
    v1: list[Interval] = []
    v0: list[tuple[int, int, int, int]] = []
    for where, line in lp.lines(text, path):
        if (body := lp.after(line, _V1)) >= 0:
            if interval := _v1_interval(line, body, where):
                v1.append(interval)
        elif (body := lp.after(line, _V0)) >= 0 and (row := _v0_row(line, body, where)):
            v0.append(row)
    notes = []
    if v0:
        runs = _v0_runs(v0)
        notes.append(
            f"{len(v0)} V0 line(s), cumulative counters: the last line of each of "
            f"{len(runs)} run(s) taken; mean length = emitted / drafts = system efficiency · (K+1)"
        )
        v1.extend(runs)
    return v1, notes


# Prometheus exposition (also the "series | value" rows a Prometheus UI copies out)
_PROM = "vllm:spec_decode_num_"
_DRAFTS, _DRAFT_TOKENS = _PROM + "drafts_total", _PROM + "draft_tokens_total"
_ACCEPTED, _PER_POS = _PROM + "accepted_tokens_total", _PROM + "accepted_tokens_per_pos_total"
PROMETHEUS_METRICS = frozenset({_DRAFTS, _DRAFT_TOKENS, _ACCEPTED, _PER_POS})


def _scrape(text: str, path: str) -> tuple[dict[str, float], dict[int, float], set[str]]:
    """Totals summed over label sets (engines, models), matched on the exact metric name
    (num_accepted_tokens is a prefix of num_accepted_tokens_per_pos)."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    seen: set[tuple[str, str]] = set()
    models: set[str] = set()
    for where, line in lp.lines(text, path):
        sample = lp.series(line, PROMETHEUS_METRICS, where)
        if sample is None:
            continue
        name, labels, value_at = sample
        key = (name, ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        if key in seen:
            raise InfersizeError(
                f"{where}: series {name}{{{key[1]}}} appears twice: give one scrape"
            )
        seen.add(key)
        value = lp.number_at(line, value_at, name, where)
        models.add(labels.get("model_name", ""))
        if name == _PER_POS:
            if "position" not in labels:
                raise InfersizeError(f"{where}: {name} without a position label")
            position = lp.count(labels["position"], "its position label", where)
            if position >= MAX_K:
                raise InfersizeError(f"{where}: position {position}: K over {MAX_K}")
            per_pos[position] = per_pos.get(position, 0.0) + value
        else:
            totals[name] = totals.get(name, 0.0) + value
    return totals, per_pos, models


def parse_prometheus(text: str, path: str) -> tuple[list[Interval], list[str]]:
    """One scrape: counters since the server started, summed over engines and models."""
    totals, per_pos, models = _scrape(text, path)
    missing = [n for n in (_DRAFTS, _ACCEPTED) if n not in totals]
    if missing and (totals or per_pos):
        have = sorted({*totals, *([_PER_POS] if per_pos else [])})
        raise InfersizeError(
            f"{path}: the scrape lacks {', '.join(missing)} (it has {', '.join(have)})"
        )
    if missing:
        return [], []
    drafts, accepted = totals[_DRAFTS], totals[_ACCEPTED]
    drafted = totals.get(_DRAFT_TOKENS, 0.0)
    if _DRAFT_TOKENS in totals:
        lp.check_accepted(accepted, drafted, path)
    rates = None
    if per_pos:
        if sorted(per_pos) != list(range(len(per_pos))):
            raise InfersizeError(f"{path}: positions {sorted(per_pos)} are not 0 … K−1")
        if any(per_pos[i] > drafts for i in per_pos):
            raise InfersizeError(
                f"{path}: a position accepted more tokens than the {drafts:g} drafts"
            )
        rates = tuple(per_pos[i] / drafts if drafts else 0.0 for i in range(len(per_pos)))
    k = len(rates) if rates else (round(drafted / drafts) if drafts and drafted else None)
    if k is not None and k > MAX_K:
        raise InfersizeError(
            f"{path}: {_count(drafted)} draft tokens in {_count(drafts)} drafts is K={k}, over "
            f"{MAX_K}, the largest K infersize models"
        )
    notes = [f"summed over {len(models)} models: their K must agree"] if len(models) > 1 else []
    return [Interval(k=k, accepted=accepted, drafted=drafted, drafts=drafts, rates=rates)], notes


PARSERS: dict[str, tuple[Callable[[str, str], tuple[list[Interval], list[str]]], str]] = {
    "vllm-log": (
        parse_vllm_log,
        "vLLM 'SpecDecoding metrics:' (V1) or 'Speculative metrics:' (V0) lines",
    ),
    "prometheus": (parse_prometheus, "vllm:spec_decode_num_*_total counters"),
    "llama-cpp-log": (
        parse_llama_cpp_log,
        "llama-server 'statistics <impl>: #gen drafts' or 'draft acceptance = … mean "
        "acceptance length' lines",
    ),
}


def _with_k(intervals: Iterable[Interval], draft_k: int | None, path: str) -> list[Interval]:
    """Each stretch with its K and its drafts (Drafted / K where the line does not count them);
    stretches that do not say K take --draft-k, or are left out when others say it."""
    out = []
    for i in intervals:
        k = i.k if i.k is not None else draft_k
        if k is not None:
            drafts = i.drafts if i.drafts is not None else i.drafted / k
            out.append(
                Interval(
                    k=k,
                    accepted=i.accepted,
                    drafted=i.drafted,
                    drafts=drafts,
                    rates=i.rates,
                    group=i.group,
                )
            )
    if not out:
        raise InfersizeError(
            f"{path}: these lines do not say K (no per-position rates): give {{draft_k}}",
            settings=("draft_k",),
        )
    return out


def _choose(
    intervals: list[Interval], draft_k: int | None, path: str
) -> tuple[tuple[int, str], list[str]]:
    """The K asked for; else the one (and llama.cpp drafter) with the most drafts, noted."""
    weight: dict[tuple[int, str], float] = {}
    for i in intervals:
        key = (i.k or 0, i.group)
        weight[key] = weight.get(key, 0.0) + (i.drafts or 0.0)
    keys = [key for key in weight if draft_k is None or key[0] == draft_k]
    if not keys:
        found = ", ".join(str(k) for k in sorted({k for k, _ in weight}))
        raise InfersizeError(
            f"{path}: no spec-decode counts at K={draft_k} (the file has K={found})"
        )
    best = max(keys, key=lambda key: weight[key])
    others = [key for key in weight if key != best]
    if not others:
        return best, []
    left = ", ".join(f"K={k}" + (f" {g}" if g else "") for k, g in others)
    used = f"K={best[0]}" + (f" {best[1]}" if best[1] else "")
    return best, [f"the file mixes drafters: used {used}, left out {left} (--draft-k picks K)"]


def _profile(used: list[Interval], drafts: float, path: str) -> tuple[float, ...]:
    if drafts <= 0 or any(i.rates is None for i in used):
        return ()
    summed = np.sum([np.asarray(i.rates) * (i.drafts or 0.0) for i in used], axis=0)
    rates = tuple(round(float(r), 12) for r in summed / drafts)  # no 0.8050000000000002
    if problem := profile_problem(rates):
        raise InfersizeError(f"{path}: its per-position acceptance is not a profile: {problem}")
    return rates


def measure(source: str, path: Path, draft_k: int | None = None) -> MeasuredAcceptance:
    """α, the profile and the mean acceptance length from a whole log or scrape. `draft_k`:
    only the counts at that K (a file that mixes K otherwise gives its K with most drafts)."""
    if source not in PARSERS:
        raise InfersizeError(f"unknown source '{source}': one of {', '.join(SOURCES)}")
    if draft_k is not None and not 1 <= draft_k <= MAX_K:
        raise ValueRangeError("draft_k", f"must be in 1..{MAX_K}, got {draft_k}")
    parse, looked_for = PARSERS[source]
    found, notes = parse(_text(path), str(path))
    if not found:
        raise InfersizeError(f"{path}: no spec-decode counts found (looked for {looked_for})")
    intervals = _with_k(found, draft_k, str(path))
    (k, group), more = _choose(intervals, draft_k, str(path))
    used = [i for i in intervals if i.k == k and i.group == group]
    drafts = sum(i.drafts or 0.0 for i in used)
    accepted = sum(i.accepted for i in used)
    if drafts <= 0:
        raise InfersizeError(f"{path}: its spec-decode counts hold no drafts")
    mean = 1.0 + accepted / drafts
    if mean > k + 1.0 + 1e-9:
        raise InfersizeError(
            f"{path}: {_count(accepted):,} accepted tokens in {_count(drafts):,} drafts is a mean "
            f"acceptance length of {mean:.4g}, over K+1 = {k + 1}: not counts of drafts of "
            f"{k} tokens"
        )
    per_position = _profile(used, drafts, str(path))
    return MeasuredAcceptance(
        source=source,
        path=str(path),
        draft_k=k,
        intervals=len(used),
        accepted_tokens=accepted,
        drafted_tokens=sum(i.drafted for i in used),
        drafts=drafts,
        mean_acceptance_length=mean,
        per_position=per_position,
        conditional=tuple(float(c) for c in conditional_rates(per_position)),
        metrics=convert(k, "mean_accepted_tokens", min(mean, k + 1.0)),
        notes=(*notes, *more),
    )


def _count(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def measured_json(result: MeasuredAcceptance) -> dict[str, object]:
    """Stable keys for `infersize alpha --from-* FILE --json`."""
    return {
        "from": result.source,
        "file": result.path,
        "draft_k": result.draft_k,
        "intervals": result.intervals,
        "accepted_tokens": _count(result.accepted_tokens),
        "drafted_tokens": _count(result.drafted_tokens),
        "drafts": _count(result.drafts),
        "mean_acceptance_length": result.mean_acceptance_length,
        "per_position_acceptance": list(result.per_position),
        "conditional_acceptance": list(result.conditional),
        "acceptance_rate": result.metrics.acceptance_rate,
        "vllm_acceptance_rate": result.measured_vllm_acceptance_rate,
        "system_efficiency": result.mean_acceptance_length / (result.draft_k + 1),
        "spec_flags": result.spec_flags(),
        "hint": "use --acceptance-rates r1,r2,... with infersize spec",
        "notes": list(result.notes),
    }
