"""Golden metrics on real daily bars: every metric of every case in golden_metrics.json."""

import numpy as np
import pytest

from barsweep.engine import METRICS
from golden.cases import (
    CASES,
    GOLDEN_PATH,
    RTOL,
    case_id,
    case_key,
    changed_metrics,
    load_bars,
    read_golden,
    run_case,
)

pytest.importorskip("bokeh_sampledata")

REGENERATE = (
    "if the change is intended, regenerate with "
    "`python tests/golden/make_golden.py`, review the diff it prints, and commit the "
    "new tests/golden/golden_metrics.json only after that review"
)


@pytest.fixture(scope="module")
def golden():
    return read_golden(GOLDEN_PATH)


def test_golden_file_holds_every_case(golden):
    keys = {case_key(c) for c in CASES}
    missing = sorted(case_id(c) for c in CASES if case_key(c) not in golden)
    stale = sorted(case_id(e) for k, e in golden.items() if k not in keys)
    assert not missing and not stale, (
        f"golden_metrics.json lacks cases {missing} and has stale cases {stale}; {REGENERATE}"
    )


@pytest.mark.parametrize("symbol", ["AAPL", "MSFT"])
def test_bars_are_daily(symbol):
    bars = load_bars(symbol)
    step_days = np.median(np.diff(bars["time"])) / (86_400 * 10**9)
    assert step_days == 1.0  # so backtest() infers ppy = year_days = 252
    assert len(bars["close"]) == 3270 and np.all(np.diff(bars["time"]) > 0)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_golden_metrics(case, golden):
    entry = golden.get(case_key(case))
    if entry is None:
        pytest.fail(f"{case_id(case)} is not in golden_metrics.json; {REGENERATE}")
    metrics = run_case(case)
    assert set(entry["metrics"]) == set(METRICS), f"the metric names changed; {REGENERATE}"
    changes = changed_metrics(entry["metrics"], metrics)
    assert not changes, (
        f"{case_id(case)}: metrics moved beyond rtol {RTOL:g} (NaN must stay NaN):\n  "
        + "\n  ".join(changes) + f"\nThe engine's results changed; {REGENERATE}"
    )
