"""Every bound on a number a user gives, declared once: its range, its unit, and the one check
whose message names the setting. The library's validation calls `check`; the sweep schema's
pydantic fields are `schema_field(default)`; the command line's options take `cli_bounds()`; so the
same number is refused alike wherever it is given, and a bound changes in one place. The engine
settings (core/knobs.py) are Bounds with help, owners and defaults besides."""

from __future__ import annotations

import math
from typing import Any

from infersize.errors import ValueRangeError
from infersize.record import record


@record
class Bound:
    name: str  # the setting's library and sweep name; the flag is --name-with-dashes
    kind: type = float  # int or float
    low: float | None = None
    high: float | None = None
    open_low: bool = False  # (low, high] rather than [low, high]
    unit: str = ""  # printed after the range in messages ("GiB")
    what: str = ""  # what the value is, said before the range ("a number of requests/s")

    def _number(self, value: float) -> str:
        return f"{int(value):,}" if self.kind is int and math.isfinite(value) else f"{value:g}"

    def _shown(self, value: Any) -> str:
        """The value given, as the range is printed (a whole number past any float as is)."""
        try:
            return self._number(float(value))
        except OverflowError:
            return str(value)

    def range_text(self) -> str:
        """'(0, 1]' for a real number, '1..1,000,000' for a whole one (the project's notation
        for each)."""
        if self.low is None or self.high is None:
            return ""
        low, high = self._number(self.low), self._number(self.high)
        if self.kind is int:
            return f"{low}..{high}"
        return f"{'(' if self.open_low else '['}{low}, {high}]"

    def contains(self, value: Any) -> bool:
        if self.low is None or self.high is None:
            return True
        try:
            number = float(value)
        except OverflowError:  # a whole number past any float
            return False
        inside = self.low < number if self.open_low else self.low <= number
        return math.isfinite(number) and inside and number <= self.high

    def check(self, value: Any) -> None:
        """A one-line error naming the setting unless `value` is within the range."""
        if not self.contains(value):
            what = f"{self.what} " if self.what else ""
            unit = f" {self.unit}" if self.unit else ""
            raise ValueRangeError(
                self.name,
                f"must be {what}in {self.range_text()}{unit}, got {self._shown(value)}",
            )

    def schema_field(self, default: Any) -> Any:
        """A pydantic field of this range (ge or gt, le) with `default`, for the sweep schema."""
        from pydantic import Field

        assert self.low is not None and self.high is not None
        if self.open_low:
            return Field(default=default, gt=self.low, le=self.high)
        return Field(default=default, ge=self.low, le=self.high)

    def cli_bounds(self) -> dict[str, Any]:
        """The range as a Typer option's min and max (closed ranges only)."""
        assert self.low is not None and self.high is not None and not self.open_low
        return {"min": self.kind(self.low), "max": self.kind(self.high)}


# A capacity request's numbers: wide enough for any real fleet, narrow enough that no product of
# two of them overflows or underflows a float (a rate of 5e-324 makes every arrival time infinite;
# a headroom of 1e308 every replica count)
REQUEST_RATE = Bound(name="request_rate", low=1e-6, high=1e6, what="a number of requests/s")
# a fleet's rate may be a thousand replicas' worth
TARGET_REQUEST_RATE = Bound(
    name="target_request_rate", low=1e-6, high=1e9, what="a number of requests/s"
)
# the largest fleet rate a figure draws: any fleet's, as the target rate
MAX_RATE = Bound(name="max_rate", low=1e-6, high=1e9, what="a number of requests/s")
CONCURRENCY = Bound(name="concurrency", kind=int, low=1, high=1 << 20)
REQUESTS = Bound(name="requests", kind=int, low=1, high=1_000_000)
PROMPT_TOKENS = Bound(name="input_tokens", kind=int, low=1, high=10_000_000)
ANSWER_TOKENS = Bound(name="output_tokens", kind=int, low=1, high=10_000_000)
SEED = Bound(name="seed", kind=int, low=0, high=2**32 - 1)
HEADROOM = Bound(name="headroom", low=1.0, high=1000.0)
# an hourly price far past any GPU's, so that a fleet's dollars stay a finite number
PRICE_USD_PER_HOUR = Bound(name="price_usd_per_hour", low=0.0, high=1e6, unit="$ per GPU-hour")

# A draft tree: candidates per node (SGLang's trees use up to 10) and the tokens the target
# verifies per sequence, the root included (far past any tree an engine verifies)
EAGLE_TOPK = Bound(name="eagle_topk", kind=int, low=1, high=64)
TREE_TOKENS = Bound(name="num_draft_tokens", kind=int, low=2, high=1024)

# The sweep's tables: the ranks kept per group, the ranks `best` shows
BEST_TOP_N = Bound(name="best_top_n", kind=int, low=1, high=100)
