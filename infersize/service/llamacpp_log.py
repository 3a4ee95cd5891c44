"""llama-server's speculative statistics, read line by line in linear time (service/logparse.py
has the rules for numbers). The "statistics <impl>:" line is cumulative per drafting
implementation; print_timing's "draft acceptance = …" line covers one request."""

from __future__ import annotations

import re

from infersize.errors import InfersizeError
from infersize.service import logparse as lp
from infersize.service.logparse import Interval

_STATS_FIELDS = ("#gen drafts", "#gen tokens", "#acc tokens")
# matched at a given place only, each without nested repetition: linear
_IMPL = re.compile(r"\s+(\S+?):\s")
_COUNTS = re.compile(
    r"(?: rate)?\s*=\s*[0-9.]+\s*\(\s*([0-9]+) accepted\s*/\s*([0-9]+) generated\)"
)
_DRAFT_TOKENS = re.compile(r"[0-9]+/[0-9]+ draft tokens")


def _stats(line: str, where: str) -> Interval | None:
    """A `statistics <impl>: ... #gen drafts = N, ..., #acc tokens = N[, #mean acc len = X,
    #acc rate/pos = (r1, r2, ...)]` line, or None for any other."""
    at = lp.after(line, "statistics")
    if at < 0 or not line[at : at + 1].isspace():
        return None
    impl = _IMPL.match(line, at)
    found = [lp.assigned(line, name, at) for name in _STATS_FIELDS]
    if impl is None or min(found) < 0:
        return None
    drafts, drafted, accepted = (
        lp.count_at(line, pos, name, where) for pos, name in zip(found, _STATS_FIELDS, strict=True)
    )
    lp.check_accepted(accepted, drafted, where)
    rates_at = lp.assigned(line, "#acc rate/pos", at)
    rates = lp.rates_at(line, rates_at, where, closing=")") if rates_at >= 0 else None
    return Interval(
        k=None if rates is None else len(rates),
        accepted=float(accepted),
        drafted=float(drafted),
        drafts=float(drafts),
        rates=rates,
        group=impl.group(1),
    )


def _task(line: str, where: str) -> tuple[Interval | None, bool]:
    """A print_timing `draft acceptance = R (A accepted / G generated)[, mean acceptance
    length = X][, acceptance rate per position = (...)]` line: (its interval, None without a
    mean length above 1) and whether the line was one."""
    at = lp.after(line, "draft acceptance")
    counts = _COUNTS.match(line, at) if at >= 0 else None
    if counts is None:
        return None, False
    accepted = lp.count_at(line, counts.start(1), "accepted tokens", where)
    generated = lp.count_at(line, counts.start(2), "generated tokens", where)
    lp.check_accepted(accepted, generated, where)
    tail = counts.end()
    mean_at = lp.assigned(line, "mean acceptance length", tail)
    if mean_at < 0:
        mean_at = lp.assigned(line, "mean len", tail)
    if mean_at < 0 or line[mean_at : mean_at + 3].lower() == "nan":
        return None, True
    mean = lp.number_at(line, mean_at, "mean acceptance length", where)
    if mean <= 1.0:
        return None, True  # nothing accepted: no drafts to recover
    rates_at = lp.assigned(line, "acceptance rate per position", tail)
    rates = lp.rates_at(line, rates_at, where, closing=")") if rates_at >= 0 else None
    interval = Interval(
        k=None if rates is None else len(rates),
        accepted=float(accepted),
        drafted=float(generated),
        drafts=accepted / (mean - 1.0),
        rates=rates,
    )
    return interval, True


def _accept_percent_only(line: str) -> bool:
    """llama.cpp's other counters: accepted / drafted without the number of drafts."""
    if "draft_n_accepted" in line or lp.assigned(line, "n_accept") >= 0:
        return True
    at = lp.after(line, "accepted ")
    return at >= 0 and _DRAFT_TOKENS.match(line, at) is not None


def parse_llama_cpp_log(text: str, path: str) -> tuple[list[Interval], list[str]]:
    """The last `statistics` line of each drafting implementation; else the per-request
    print_timing lines with a mean length (drafts = accepted / (mean − 1), from its rounding)."""
    stats: dict[str, Interval] = {}
    tasks: list[Interval] = []
    percent_only = False
    for where, line in lp.lines(text, path):
        if (interval := _stats(line, where)) is not None:
            stats[interval.group] = interval
            continue
        task, was_task = _task(line, where)
        if task is not None:
            tasks.append(task)
        percent_only = percent_only or (was_task and task is None) or _accept_percent_only(line)
    if stats:
        return list(stats.values()), ["llama.cpp statistics lines are cumulative: last one used"]
    if tasks:
        return tasks, ["drafts per request recovered from its rounded mean acceptance length"]
    if percent_only:
        raise InfersizeError(
            f"{path}: these llama.cpp lines give accepted / drafted tokens only (llama.cpp's "
            "accept %, not α: its drafts stop early); α needs the number of drafts, from a "
            "'mean acceptance length' or a 'statistics <impl>: #gen drafts' line (llama-server "
            "2026 builds, the statistics at -lv 4)"
        )
    return [], []
