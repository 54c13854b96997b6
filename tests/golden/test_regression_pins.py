"""Regression pins on real daily bars: every metric of every case in pinned_metrics.json.

The pinned values were written by barsweep's own ``backtest()`` (make_pins.py): these
tests catch a change of results, not a wrong result (the vectorbt and TA-Lib oracles do).
"""

import numpy as np
import pytest

from barsweep.engine import METRICS
from golden.cases import (
    CASES,
    PINS_PATH,
    RTOL,
    case_id,
    case_key,
    changed_metrics,
    load_bars,
    read_pins,
    run_case,
)

pytest.importorskip("bokeh_sampledata")

REGENERATE = (
    "if the change is intended, regenerate with "
    "`python tests/golden/make_pins.py`, review the diff it prints, and commit the "
    "new tests/golden/pinned_metrics.json only after that review"
)


@pytest.fixture(scope="module")
def pins():
    return read_pins(PINS_PATH)


def test_pins_file_holds_every_case(pins):
    keys = {case_key(c) for c in CASES}
    missing = sorted(case_id(c) for c in CASES if case_key(c) not in pins)
    stale = sorted(case_id(e) for k, e in pins.items() if k not in keys)
    assert not missing and not stale, (
        f"pinned_metrics.json lacks cases {missing} and has stale cases {stale}; {REGENERATE}"
    )


@pytest.mark.parametrize("symbol", ["AAPL", "MSFT"])
def test_bars_are_daily(symbol):
    bars = load_bars(symbol)
    step_days = np.median(np.diff(bars["time"])) / (86_400 * 10**9)
    assert step_days == 1.0  # so backtest() infers ppy = year_days = 252
    assert len(bars["close"]) == 3270 and np.all(np.diff(bars["time"]) > 0)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_metrics_match_regression_pins(case, pins):
    entry = pins.get(case_key(case))
    if entry is None:
        pytest.fail(f"{case_id(case)} is not in pinned_metrics.json; {REGENERATE}")
    metrics = run_case(case)
    assert set(entry["metrics"]) == set(METRICS), f"the metric names changed; {REGENERATE}"
    changes = changed_metrics(entry["metrics"], metrics)
    assert not changes, (
        f"{case_id(case)}: metrics moved beyond rtol {RTOL:g} (NaN must stay NaN):\n  "
        + "\n  ".join(changes) + f"\nThe engine's results changed; {REGENERATE}"
    )
