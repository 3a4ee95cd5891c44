"""The schedule's choice on constructed speedups: neighbouring ranges whose Ks are within the
2 % noise margin are merged (the table does not thrash at a threshold), a gap above it is
kept, every doubling of the batch weighs alike in the static K, and TensorRT-LLM's first key
caps the rest. Expected numbers are worked by hand in each test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infersize.core.schedule import (
    MARGIN,
    Range,
    batch_weights,
    highest_first,
    schedule,
    static_k,
    with_plain,
)
from infersize.service.schedule_engines import vllm_cost

BATCHES = np.arange(1.0, 7.0)


def _speedup(k2: list[float], k3: list[float]) -> np.ndarray:
    """Batches 1..6 at K = 0 (plain, 1), 1 (1.3 everywhere), 2 and 3."""
    return with_plain(np.column_stack([np.full(6, 1.3), k2, k3]))


def test_every_doubling_of_the_batch_weighs_alike():
    # ln((b + 1) / b) telescopes: batches 1..B weigh ln(B + 1) together, so batch 1 weighs
    # ln 2 and batches 2..3, 4..7, 512..1023 each weigh ln 2 as well
    weights = batch_weights(np.arange(1.0, 1024.0))
    assert weights[0] == pytest.approx(math.log(2))
    assert weights[1:3].sum() == pytest.approx(math.log(2))
    assert weights[511:1023].sum() == pytest.approx(math.log(2))
    assert weights.sum() == pytest.approx(math.log(1024))


def test_ks_within_the_margin_of_each_other_are_one_range():
    """The best K flips 3, 3, 2, 2, 3, 3 with 1.3 % between them (1.52 against 1.50): inside
    the 2 % margin, so one K runs everywhere. The static K is 3: batches 1, 2, 5, 6 weigh
    ln 2 + ln 1.5 + ln 1.2 + ln(7/6) = 1.435 at 1.52, batches 3, 4 ln(4/3) + ln 1.25 = 0.511
    at 1.50; K = 2 has them the other way round, and 1.435 ln 1.52 + 0.511 ln 1.50 = 0.8080
    beats 1.435 ln 1.50 + 0.511 ln 1.52 = 0.7958."""
    speedup = _speedup([1.50, 1.50, 1.52, 1.52, 1.50, 1.50], [1.52, 1.52, 1.50, 1.50, 1.52, 1.52])
    assert MARGIN == 0.02
    assert static_k(speedup, batch_weights(BATCHES)) == 3
    assert schedule(speedup, BATCHES) == (3, [Range(0, 6, 3)])


def test_ks_further_apart_than_the_margin_stay_apart():
    """At batches 3 and 4 K = 2 runs 1.56 against K = 3's 1.50, 4 % more: past the margin,
    so the table switches there; at the others K = 2 runs 1.40, 8 % below K = 3. The static K
    is 3 (1.435 ln 1.52 + 0.511 ln 1.50 = 0.8080 against 1.435 ln 1.40 + 0.511 ln 1.56 =
    0.7100)."""
    speedup = _speedup([1.40, 1.40, 1.56, 1.56, 1.40, 1.40], [1.52, 1.52, 1.50, 1.50, 1.52, 1.52])
    assert schedule(speedup, BATCHES) == (3, [Range(0, 2, 3), Range(2, 4, 2), Range(4, 6, 3)])


def test_a_draft_that_slows_decoding_gives_way_to_k0():
    """K = 1 runs 0.99 at batches 5 and 6: 1 % slower than plain decoding, inside the margin,
    but a draft that slows decoding never runs: K = 0 is written out there."""
    speedup = with_plain(np.column_stack([[1.3, 1.2, 1.1, 1.05, 0.99, 0.99]]))
    assert schedule(speedup, BATCHES) == (1, [Range(0, 4, 1), Range(4, 6, 0)])


def test_tensorrt_llm_runs_no_later_k_above_its_first():
    """A schedule rising from K = 2 (batches 1-2) to K = 3 (3-6): TensorRT-LLM's smallest key
    must map to max_draft_len, so it runs 2 everywhere or 3 everywhere. Weighted log speedups:
    all 2 is (ln 2 + ln 1.5) ln 1.5 + (ln(4/3) + ln 1.25 + ln 1.2 + ln(7/6)) ln 1.3 = 0.6677,
    all 3 is (ln 2 + ln 1.5) ln 1.45 + (the same) ln 1.6 = 0.8064: all 3."""
    speedup = _speedup([1.5, 1.5, 1.3, 1.3, 1.3, 1.3], [1.45, 1.45, 1.6, 1.6, 1.6, 1.6])
    rising = [Range(0, 2, 2), Range(2, 6, 3)]
    assert highest_first(rising, speedup, batch_weights(BATCHES)) == [Range(0, 6, 3)]
    falling = [Range(0, 2, 3), Range(2, 6, 2)]
    assert highest_first(falling, speedup, batch_weights(BATCHES)) == falling


def test_vllm_cost_is_the_measured_one_at_its_batches_and_log_linear_between():
    # https://github.com/vllm-project/vllm/issues/49548: +6.56 % TPOT at 2 concurrent requests,
    # +21.58 % at 189; halfway on the log axis, sqrt(2 * 189) = 19.44, it is the mean, 14.07 %
    cost = vllm_cost(np.array([1.0, 2.0, math.sqrt(2 * 189), 189.0, 1024.0]))
    assert cost == pytest.approx([0.0656, 0.0656, 0.1407, 0.2158, 0.2158])
