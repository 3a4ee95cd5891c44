"""Reading engine logs and scrapes line by line, in time linear in their size: plain string
search (str.find, str.partition) and anchored patterns without nested repetition, never a
search that backtracks over a line. Every number is checked where it is read: counts are whole
numbers of at most MAX_COUNT_DIGITS digits (exact as floats), rates are decimals in [0, 1],
Prometheus values finite; a malformed number is an error that names the line and what it said.

The formats (service/speclogs.py says how the counts are used):
  vLLM V1   "... SpecDecoding metrics: ..., Accepted: 206 tokens, Drafted: 609 tokens,
             Per-position acceptance rate: 0.601, 0.286, 0.128, ..."  (fields in any order)
  vLLM V0   "... Speculative metrics: ..., Number of speculative tokens: 3, Number of accepted
             tokens: 8547, Number of draft tokens: 13311, Number of emitted tokens: 10616."
  /metrics  "vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0" (or the
             "series | value" rows a Prometheus UI copies out)
  llama.cpp "statistics <impl>: ... #gen drafts = 87, #acc drafts = 70, #gen tokens = 259,
             #acc tokens = 167[, #mean acc len = 2.92, #acc rate/pos = (0.805, 0.632, 0.483)]"
             "draft acceptance = 0.64 (167 accepted / 259 generated), mean acceptance length =
             2.92[, acceptance rate per position = (0.805, 0.632, 0.483)]"
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from infersize.core.evaluate import MAX_K
from infersize.errors import InfersizeError
from infersize.record import record

MAX_LINE_CHARS = 1 << 20  # engines print metrics on short lines; a longer line is no log's
MAX_COUNT_DIGITS = 15  # below 2**53: every count is exact as a float, and far past any real run
MAX_NUMBER_CHARS = 40  # "1.7961449510643044e+09" and the like

# every pattern is matched at a given place (match/fullmatch with pos), none searched for
_DIGITS = re.compile(r"[0-9]+")
_RATE_CHARS = re.compile(r"[0-9.]*")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TOKEN = re.compile(r"[^\s,()]*")
_SPACES = re.compile(r"\s*")
_SPECIAL = frozenset({"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'[\s,]*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_LABEL_START = re.compile(r'[\s,]*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"')
_UNESCAPE = re.compile(r"\\(.)")


@record
class Interval:
    """One stretch of counts: a V1 log line, a V0 run, a scrape, a llama.cpp drafter."""

    k: int | None  # draft tokens per step; None where the line does not say
    accepted: float  # accepted draft tokens (the prefix, as vLLM V1 counts them)
    drafted: float  # draft tokens proposed
    drafts: float | None  # steps that carried a draft; None: Drafted / K once K is known
    rates: tuple[float, ...] | None  # r_1 … r_K over this stretch (unconditional)
    group: str = ""  # llama.cpp: the drafting implementation


def check_accepted(accepted: float, drafted: float, where: str) -> None:
    if accepted > drafted:
        raise InfersizeError(
            f"{where}: {accepted:.0f} accepted tokens is more than the {drafted:.0f} drafted: "
            "not counts of one run"
        )


def _end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where a run of `pattern` (which may match nothing) starting at `pos` ends."""
    run = pattern.match(text, pos)
    return run.end() if run else pos


def shown(text: str, start: int = 0, end: int | None = None, limit: int = 24) -> str:
    """What the log said at text[start:end], cut for an error line (copying no more)."""
    end = len(text) if end is None else end
    if end - start <= limit:
        return text[start:end].strip()
    return f"{text[start : start + limit].strip()}… ({end - start:,} characters)"


def lines(text: str, path: str) -> Iterator[tuple[str, str]]:
    """Each line with its place ("FILE: line N") for errors; a line past MAX_LINE_CHARS is
    refused whole (no engine prints one, and nothing below reads one)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise InfersizeError(
                f"{path}: line {number} is {len(line):,} characters long, over the "
                f"{MAX_LINE_CHARS:,} of any engine's metrics line: not a log this reads"
            )
        yield f"{path}: line {number}", line


def after(text: str, label: str, start: int = 0) -> int:
    """Where the text after the first `label` at or past `start` begins, for a label that
    starts the text or a word in it (after a space, comma or bracket); -1 without one. Each
    find starts past the last, so the search is linear."""
    while (i := text.find(label, start)) >= 0:
        if i == 0 or text[i - 1] in " ,([":
            return i + len(label)
        start = i + 1
    return -1


def assigned(text: str, label: str, start: int = 0) -> int:
    """Where the value of `label = value` begins (spaces around '=' allowed); -1 without it."""
    i = after(text, label, start)
    if i < 0:
        return -1
    i = _end(_SPACES, text, i)
    if not text.startswith("=", i):
        return -1
    return _end(_SPACES, text, i + 1)


def count_at(text: str, pos: int, what: str, where: str) -> int:
    """The count at text[pos:] (after spaces): a whole number of at most MAX_COUNT_DIGITS
    digits, as the log printed it."""
    pos = _end(_SPACES, text, pos)
    digits = _DIGITS.match(text, pos)
    if digits is None:
        end = _end(_TOKEN, text, pos)
        raise InfersizeError(f"{where}: {what} '{shown(text, pos, end)}' is not a whole number")
    if digits.end() - pos > MAX_COUNT_DIGITS:
        raise InfersizeError(
            f"{where}: {what} has {digits.end() - pos:,} digits, more than any real count "
            f"(at most {MAX_COUNT_DIGITS})"
        )
    return int(digits.group())


def count(token: str, what: str, where: str) -> int:
    """A count given whole (a label's value): nothing else may follow its digits."""
    if _DIGITS.fullmatch(token) is None:
        raise InfersizeError(f"{where}: {what} '{shown(token)}' is not a whole number")
    return count_at(token, 0, what, where)


def rates_at(text: str, pos: int, where: str, closing: str = "") -> tuple[float, ...]:
    """The rates at text[pos:]: '0.601, 0.286, 0.128, Avg ...' (the list ends at the first
    piece that is not digits and dots), or '(0.8, 0.6)' with `closing` ')'. A piece of digits
    and dots that is not a number in [0, 1] is an error."""
    opened = pos = _end(_SPACES, text, pos)
    if closing:
        if not text.startswith("(", pos):
            raise InfersizeError(f"{where}: rates '{shown(text, pos)}' do not start with '('")
        pos += 1
    rates: list[float] = []
    while True:
        start = _end(_SPACES, text, pos)
        end = _end(_RATE_CHARS, text, start)
        if end == start:
            break  # the next field ("Avg Draft acceptance rate: 33.8%")
        if end - start > MAX_NUMBER_CHARS or not _DECIMAL.fullmatch(text, start, end):
            raise InfersizeError(
                f"{where}: per-position rate '{shown(text, start, end)}' is not a number"
            )
        rates.append(float(text[start:end]))
        if rates[-1] > 1.0:
            raise InfersizeError(f"{where}: per-position rate {text[start:end]} is over 1")
        pos = _end(_SPACES, text, end)
        if not text.startswith(",", pos) or len(rates) > MAX_K:
            break
        pos += 1
    if not rates:
        raise InfersizeError(f"{where}: no per-position rates in '{shown(text, pos)}'")
    if len(rates) > MAX_K:
        raise InfersizeError(
            f"{where}: more than {MAX_K} per-position rates: K over {MAX_K}, the largest K "
            "infersize models"
        )
    if closing and not text.startswith(closing, pos):
        raise InfersizeError(
            f"{where}: rates '{shown(text, opened, pos)}' have no closing '{closing}'"
        )
    return tuple(rates)


def number_at(text: str, pos: int, what: str, where: str) -> float:
    """A Prometheus sample value or a printed mean at text[pos:] (a float; NaN and infinities
    spelt out): finite, not negative, below 10**MAX_COUNT_DIGITS."""
    pos = _end(_SPACES, text, pos)
    end = _end(_TOKEN, text, pos)
    if end - pos > MAX_NUMBER_CHARS:
        if _DIGITS.fullmatch(text, pos, end):
            count_at(text, pos, what, where)  # says how many digits
        raise InfersizeError(f"{where}: {what} '{shown(text, pos, end)}' is not a number")
    token = text[pos:end]
    if token.lower() in _SPECIAL:
        raise InfersizeError(f"{where}: {what} is {token}: a counter is a finite count")
    if not _FLOAT.fullmatch(token):
        raise InfersizeError(f"{where}: {what} '{token}' is not a number")
    value = float(token)
    if value < 0 or value >= 10.0**MAX_COUNT_DIGITS:
        raise InfersizeError(f"{where}: {what} is {token}: not a count of a real run")
    return value


def series(line: str, wanted: frozenset[str], where: str) -> tuple[str, dict[str, str], int] | None:
    """A Prometheus sample of one of the `wanted` metrics: (name, labels, where its value
    begins); None for any other line. The value may follow a '|' (a Prometheus UI's rows), a
    timestamp may follow it."""
    start = _end(_SPACES, line, 0)
    name = _NAME.match(line, start)
    if name is None or name.group() not in wanted:
        return None
    pos, labels = name.end(), dict[str, str]()
    if line.startswith("{", pos):
        labels, pos = label_set(line, pos, where)
    pos = _end(_SPACES, line, pos)
    if line.startswith("|", pos):
        pos = _end(_SPACES, line, pos + 1)
    if pos == name.end() or pos >= len(line):
        raise InfersizeError(
            f"{where}: '{shown(line, start, limit=60)}' is not 'name{{labels}} value'"
        )
    return name.group(), labels, pos


def label_set(text: str, pos: int, where: str) -> tuple[dict[str, str], int]:
    """`{a="x",b="y\\"z"}` at text[pos:]: its labels and where it ends. One anchored match per
    label; its value pattern consumes each character by exactly one branch, so it cannot
    backtrack."""
    labels: dict[str, str] = {}
    i = pos + 1
    while (label := _LABEL.match(text, i)) is not None:
        value = label.group(2)
        labels[label.group(1)] = _UNESCAPE.sub(r"\1", value) if "\\" in value else value
        i = label.end()
    end = _end(_SPACES, text, i)
    if text.startswith("}", end):
        return labels, end + 1
    if _LABEL_START.match(text, end):  # the value pattern found no closing quote
        raise InfersizeError(f"{where}: a label value has no closing quote")
    raise InfersizeError(f"{where}: its labels '{shown(text, pos, limit=60)}' do not parse")
