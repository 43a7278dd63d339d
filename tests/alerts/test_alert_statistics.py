"""The spike and conversion tests' false alarm rate with no real change, by simulation
(seeded): at or below their nominal level, allowing three standard errors of the simulation."""

from __future__ import annotations

import math
import time

import numpy as np

from derived import alert_figures


def _at_most_nominal(alarms: int, runs: int, alpha: float) -> bool:
    return alarms / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


def test_the_spike_test_raises_no_more_false_alarms_than_its_level():
    rng = np.random.default_rng(42)
    runs, alarms, started = 20_000, 0, time.monotonic()
    days = alert_figures.SPIKE_DAYS
    # A steady error at 15 an hour: the last hour and each baseline hour from one Poisson rate.
    last_hours = rng.poisson(15, runs)
    baselines = rng.poisson(15 * days, runs)
    for last_hour, baseline in zip(last_hours, baselines, strict=True):
        alarms += alert_figures.spike_fires(int(last_hour), int(baseline))
    assert _at_most_nominal(alarms, runs, alert_figures.SPIKE_ALPHA), alarms
    assert time.monotonic() - started < 30


def test_the_conversion_test_raises_no_more_false_alarms_than_its_level():
    rng = np.random.default_rng(7)
    runs, alarms = 3_000, 0
    # Today and the baseline convert at the same 4 %; the baseline has four times the sessions.
    for _ in range(runs):
        sessions = int(rng.integers(200, 800))
        converted = int(rng.binomial(sessions, 0.04))
        base_converted = int(rng.binomial(4 * sessions, 0.04))
        alarms += bool(alert_figures.conversion_falls(converted, sessions, base_converted,
                                                      4 * sessions))
    assert _at_most_nominal(alarms, runs, alert_figures.CONVERSION_ALPHA), alarms


def test_both_tests_find_a_real_change():
    assert alert_figures.spike_fires(40, 7 * 10)
    assert alert_figures.conversion_falls(4, 400, 200, 4000)
    assert alert_figures.conversion_falls(15, 400, 200, 4000) is False
