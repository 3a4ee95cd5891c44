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

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infersize.core.acceptance import AcceptanceMetrics, convert
from infersize.core.profile import conditional_rates, profile_problem
from infersize.errors import InfersizeError
from infersize.files import InputFileError, read_input

SOURCES = ("vllm-log", "prometheus", "llama-cpp-log")
MAX_LOG_BYTES = 512 * 2**20  # server logs grow; still read whole, so bounded

_NUM = r"([0-9]+(?:\.[0-9]*)?|nan)"
_LIST = r"\(?\s*([0-9.]+(?:\s*,\s*[0-9.]+)*)\s*\)?"


@dataclass(frozen=True, kw_only=True)
class Interval:
    """One stretch of counts: a V1 log line, a V0 run, a scrape, a llama.cpp drafter."""

    k: int | None  # draft tokens per step; None where the line does not say
    accepted: float  # accepted draft tokens (the prefix, as vLLM V1 counts them)
    drafted: float  # draft tokens proposed
    drafts: float | None  # steps that carried a draft; None: Drafted / K once K is known
    rates: tuple[float, ...] | None  # r_1 … r_K over this stretch (unconditional)
    group: str = ""  # llama.cpp: the drafting implementation


@dataclass(frozen=True, kw_only=True)
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
        """What to paste after `infersize spec --target … --draft … --gpu …`."""
        if self.per_position:
            rates = ",".join(f"{r:.4g}" for r in self.per_position)
            return f"--draft-k {self.draft_k} --acceptance-rates {rates}"
        return f"--draft-k {self.draft_k} --acceptance-rate {self.metrics.acceptance_rate:.4g}"


def _text(path: Path) -> str:
    try:
        return read_input(path, MAX_LOG_BYTES).decode("utf-8", errors="replace")
    except InputFileError as exc:
        raise InfersizeError(str(exc)) from None


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(p) for p in re.split(r"\s*,\s*", text.strip()))


# vLLM V1: the field order changed between releases (0.9.x rate first; 0.11+ mean length
# first, throughputs, "Avg Draft acceptance rate" last), so each field is found on its own.
_V1 = re.compile(r"SpecDecoding metrics: (.*)$")
_V1_ACCEPTED = re.compile(r"\bAccepted: ([0-9]+) tokens")
_V1_DRAFTED = re.compile(r"\bDrafted: ([0-9]+) tokens")
_V1_RATES = re.compile(r"Per-position acceptance rate: ([0-9.]+(?:, [0-9.]+)*)")
_V0 = re.compile(
    r"Speculative metrics: .*Number of speculative tokens: ([0-9]+), "
    r"Number of accepted tokens: ([0-9]+), Number of draft tokens: ([0-9]+), "
    r"Number of emitted tokens: ([0-9]+)"
)


def _v1_interval(body: str) -> Interval | None:
    accepted, drafted = _V1_ACCEPTED.search(body), _V1_DRAFTED.search(body)
    if accepted is None or drafted is None:
        return None
    rates = _V1_RATES.search(body)
    per_pos = _floats(rates.group(1)) if rates else None
    k = len(per_pos) if per_pos else None
    got, sent = float(accepted.group(1)), float(drafted.group(1))
    return Interval(k=k, accepted=got, drafted=sent, drafts=None, rates=per_pos)


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


def parse_vllm_log(text: str) -> tuple[list[Interval], list[str]]:
    """V1 `SpecDecoding metrics:` lines (one interval each) and V0 `Speculative metrics:`
    lines (cumulative), whatever logger prefix they carry."""
    v1: list[Interval] = []
    v0: list[tuple[int, int, int, int]] = []
    for line in text.splitlines():
        if (m := _V1.search(line)) and (interval := _v1_interval(m.group(1))):
            v1.append(interval)
        elif m0 := _V0.search(line):
            k, accepted, draft, emitted = (int(g) for g in m0.groups())
            if k > 0:
                v0.append((k, accepted, draft, emitted))
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
_SERIES = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s*\|?\s*([-+0-9.eEinfINFaN]+)(?:\s+\S+)?\s*$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_PROM = "vllm:spec_decode_num_"
_DRAFTS, _DRAFT_TOKENS = _PROM + "drafts_total", _PROM + "draft_tokens_total"
_ACCEPTED, _PER_POS = _PROM + "accepted_tokens_total", _PROM + "accepted_tokens_per_pos_total"
PROMETHEUS_METRICS = (_DRAFTS, _DRAFT_TOKENS, _ACCEPTED, _PER_POS)


def _scrape(text: str, path: str) -> tuple[dict[str, float], dict[int, float], set[str]]:
    """Totals summed over label sets (engines, models), matched on the exact metric name
    (num_accepted_tokens is a prefix of num_accepted_tokens_per_pos)."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    seen: set[tuple[str, str]] = set()
    models: set[str] = set()
    for line in text.splitlines():
        m = _SERIES.match(line.strip())
        if m is None or m.group(1) not in PROMETHEUS_METRICS:
            continue
        name, labels_text, value = m.group(1), m.group(2) or "", float(m.group(3))
        labels = dict(_LABEL.findall(labels_text))
        key = (name, ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        if key in seen:
            raise InfersizeError(
                f"{path}: series {name}{{{labels_text}}} appears twice: give one scrape"
            )
        seen.add(key)
        models.add(labels.get("model_name", ""))
        if name == _PER_POS:
            position = int(labels.get("position", "-1"))
            if position < 0:
                raise InfersizeError(f"{path}: {name} without a position label")
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
    rates = None
    if per_pos:
        if sorted(per_pos) != list(range(len(per_pos))):
            raise InfersizeError(f"{path}: positions {sorted(per_pos)} are not 0 … K−1")
        rates = tuple(per_pos[i] / drafts if drafts else 0.0 for i in range(len(per_pos)))
    k = len(rates) if rates else (round(drafted / drafts) if drafts and drafted else None)
    notes = [f"summed over {len(models)} models: their K must agree"] if len(models) > 1 else []
    return [Interval(k=k, accepted=accepted, drafted=drafted, drafts=drafts, rates=rates)], notes


# llama-server: the "statistics <impl>:" line is cumulative per drafting implementation;
# print_timing's "draft acceptance = …" line covers one request.
_LC_STATS = re.compile(
    r"statistics\s+(\S+): .*#gen drafts\s*=\s*([0-9]+), #acc drafts\s*=\s*[0-9]+, "
    r"#gen tokens\s*=\s*([0-9]+), #acc tokens\s*=\s*([0-9]+)"
    r"(?:, #mean acc len\s*=\s*" + _NUM + r", #acc rate/pos\s*=\s*" + _LIST + r")?"
)
_LC_TASK = re.compile(
    r"draft acceptance(?: rate)?\s*=\s*[0-9.]+\s*\(\s*([0-9]+) accepted\s*/\s*([0-9]+) generated\)"
    r"(?:, mean (?:acceptance length|len)\s*=\s*" + _NUM + r")?"
    r"(?:, acceptance rate per position\s*=\s*" + _LIST + r")?"
)
_LC_OTHER = re.compile(r"n_accept\s*=|draft_n_accepted|accepted [0-9]+/[0-9]+ draft tokens")


def parse_llama_cpp_log(text: str, path: str) -> tuple[list[Interval], list[str]]:
    """The last `statistics` line of each drafting implementation; else the per-request
    print_timing lines with a mean length (drafts = accepted / (mean − 1), from its rounding)."""
    stats: dict[str, Interval] = {}
    tasks: list[Interval] = []
    for line in text.splitlines():
        if m := _LC_STATS.search(line):
            impl, drafts, drafted, accepted, _, rates_text = m.groups()
            rates = _floats(rates_text) if rates_text else None
            k = len(rates) if rates else None
            stats[impl] = Interval(
                k=k,
                accepted=float(accepted),
                drafted=float(drafted),
                drafts=float(drafts),
                rates=rates,
                group=impl,
            )
        elif (t := _LC_TASK.search(line)) and t.group(3) and float(t.group(3)) > 1.0:
            accepted, drafted, mean = float(t.group(1)), float(t.group(2)), float(t.group(3))
            rates = _floats(t.group(4)) if t.group(4) else None
            k = len(rates) if rates else None
            tasks.append(
                Interval(
                    k=k,
                    accepted=accepted,
                    drafted=drafted,
                    drafts=accepted / (mean - 1.0),
                    rates=rates,
                )
            )
    if stats:
        return list(stats.values()), ["llama.cpp statistics lines are cumulative: last one used"]
    if tasks:
        return tasks, ["drafts per request recovered from its rounded mean acceptance length"]
    if _LC_TASK.search(text) or _LC_OTHER.search(text):
        raise InfersizeError(
            f"{path}: these llama.cpp lines give accepted / drafted tokens only (llama.cpp's "
            "accept %, not α: its drafts stop early); α needs the number of drafts, from a "
            "'mean acceptance length' or a 'statistics <impl>: #gen drafts' line (llama-server "
            "2026 builds, the statistics at -lv 4)"
        )
    return [], []


PARSERS: dict[str, tuple[Callable[[str, str], tuple[list[Interval], list[str]]], str]] = {
    "vllm-log": (
        lambda text, path: parse_vllm_log(text),
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
