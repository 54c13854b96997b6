"""The lockstep simulation (the GPU's: one bar per iteration, so a warp's lanes stay on one
bar) against the CPU's (fast stretches scanned whole): the same function, the same bits.

``simulate(..., lockstep=True)`` is what the CUDA kernel runs; compiled for the CPU it is
each strategy's ``lockstep_kernel``. Every case of the GPU tests (every strategy, every
execution setting, ruin, walk-forward spans, PBO segment sums) runs through both CPU
kernels here and must agree byte for byte; ``lockstep_trace.py`` runs ``simulate`` as
plain Python with recording ``scan`` and ``signal`` to check that lockstep really takes
one bar per iteration.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.gpu_cases import (
    N_SEGMENTS,
    RUIN_BARS,
    SPANS,
    cases,
    import_modules,
    ruin_bars,
    ruin_cases,
)

from barsweep.engine import METRICS, Execution, get_strategy
from barsweep.engine.core.sweep import sweep_cpu
from barsweep.engine.strategies import kernels

HERE = Path(__file__).resolve().parent

CASES = cases() + ruin_cases()
N_BARS = 2_000


@pytest.fixture(scope="module")
def bars():
    import_modules()
    return random_bars(N_BARS, 11)


def both(strategy, bars, params, execution, **kw) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(metrics, segment sums)`` of one sweep by the CPU kernel, then by the lockstep
    kernel."""
    n_combos = len(next(iter(params.values()))) if params else 1
    out = []
    for kernel in (None, kernels.compiled(strategy.signal).lockstep_kernel):
        segs = None if "spans" in kw else np.full((n_combos, N_SEGMENTS, 2), np.nan)
        out.append((sweep_cpu(strategy, bars, params, execution, 8760.0, seg_sums=segs,
                              kernel=kernel, **kw), segs))
    return out


@pytest.mark.parametrize(("case_id", "name", "execution", "params", "kwargs"), CASES,
                         ids=[c[0] for c in CASES])
def test_lockstep_equals_the_cpu_kernel_bit_for_bit(bars, case_id, name, execution, params,
                                                    kwargs):
    strategy = get_strategy(name)
    data = ruin_bars(**RUIN_BARS) if case_id.startswith("ruin") else bars
    (whole, segs), (stepped, stepped_segs) = both(strategy, data, params, Execution(**kwargs))
    assert whole.tobytes() == stepped.tobytes(), case_id
    assert segs.tobytes() == stepped_segs.tobytes() and np.abs(segs).sum() > 0, case_id
    assert np.nanmax(whole[:, 8]) > 0  # trades happen
    spans = [(a, min(z, len(data["close"]))) for a, z in SPANS]
    (whole, _), (stepped, _) = both(strategy, data, params, Execution(**kwargs), spans=spans)
    assert whole.tobytes() == stepped.tobytes(), f"{case_id} spans"
    if case_id == "ruin-donchian-close_short_slipped":  # ruined on window (200, 260)'s first bar
        window = whole[SPANS.index((200, 260))]  # (spans, combos, metrics)
        assert (window[:, METRICS.index("ulcer_index")] == 100.0).any()  # -100% every bar


@pytest.mark.parametrize("execution", [dict(fill="close", fees=0.001),
                                       dict(fill="next_open", direction="both",
                                            stop_loss=0.01)])
def test_lockstep_takes_one_bar_per_iteration(execution):
    """Traced in plain Python: in lockstep no flat stretch is scanned ahead and each
    iteration starts on the next bar, each bar once (a warp's lanes stay together); the
    CPU's scan looks ahead to the end of the run. Both give the same metrics."""
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    out = subprocess.run([sys.executable, str(HERE / "lockstep_trace.py"), json.dumps(execution)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    trace = json.loads(out.stdout.splitlines()[-1])
    n = trace["n_bars"]
    assert trace["lockstep"]["scan_widths"] == []  # it tests each flat bar by itself
    assert trace["lockstep"]["iteration_bars"] == list(range(n))
    assert max(trace["whole"]["scan_widths"]) > 1
    # flat (and, without stops, held) stretches are skipped whole
    assert trace["whole"]["iterations"] < (n / 2 if execution["fill"] == "close" else n)
    assert trace["lockstep"]["metrics"] == trace["whole"]["metrics"]
    assert trace["lockstep"]["n_trades"] > 2


RECORDED = [("ema_cross", dict(fast=np.array([4]), slow=np.array([15])), {}),
            ("sma_hold", dict(period=np.array([6]), hold=np.array([3]), k=np.array([0.01])),
             {}),
            ("ema_cross", dict(fast=np.array([3]), slow=np.array([11])),
             dict(fill="next_open", direction="both", fees=0.001, slippage=0.002,
                  fixed_fee=1.0, trailing_stop=0.03, funding=True)),
            ("donchian", dict(period=np.array([5])),
             dict(fill="close", direction="short", slippage=0.6))]


@pytest.mark.parametrize(("name", "params", "kwargs"), RECORDED,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(RECORDED)])
@pytest.mark.parametrize("span", [None, (300, 1500)])
def test_lockstep_records_the_same_equity_and_trades(bars, name, params, kwargs, span):
    """What ``backtest()`` records (the equity at every close, every trade), from both
    kernels on one combo, byte for byte: whole runs and a window starting at bar 300."""
    from barsweep.engine import N_METRICS
    from barsweep.engine.core.hoist import hoist
    from barsweep.engine.core.inputs import prepare_inputs
    from barsweep.engine.core.records import symbol_record
    from barsweep.engine.core.simulate import Outputs, no_segments

    strategy = get_strategy(name)
    data = ruin_bars(n_bars=N_BARS, seed=23, vol=0.12) if "slippage" in kwargs and \
        kwargs.get("direction") == "short" else bars
    inputs = prepare_inputs(strategy, data, params, Execution(**kwargs), 8760.0)
    ind, rows = hoist(strategy, inputs.columns, inputs.strategy_params, inputs.n_combos)
    (run,) = inputs.runs(None if span is None else [span])
    compiled = kernels.compiled(strategy.signal)
    recorded = []
    for kernel in (compiled.kernel, compiled.lockstep_kernel):
        out = Outputs(np.zeros((1, N_METRICS)), no_segments(1))
        rec = symbol_record(N_BARS)
        rec.equity[:] = np.nan
        rec.trades[:] = np.zeros((), rec.trades.dtype)  # the rows past the trades compared too
        kernel(inputs.bars, ind, inputs.combos(rows), run, out, rec)
        recorded.append({"metrics": out.metrics, "equity": rec.equity, "trades": rec.trades})
    whole, stepped = recorded
    for field in whole:
        assert whole[field].tobytes() == stepped[field].tobytes(), field
    if name == "donchian":  # a short slipped by 60%: ruined on its first trade
        assert whole["metrics"][0, METRICS.index("ruined")] == 1.0
    else:
        assert whole["metrics"][0, METRICS.index("n_trades")] >= 2
