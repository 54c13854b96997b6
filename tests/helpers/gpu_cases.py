"""CUDA-vs-CPU cases: every strategy and every execution feature, sized for the simulator.

The simulator runs each thread's bars in Python (~1 s for 64 combos x 500 bars), so each
case is small; together they cover every strategy (docs/STRATEGIES.md's custom ones
included, one with a signal of the position state, and one on host-hoisted indicators)
and every execution setting: both fills, the three directions, fees, fixed fees,
slippage, stop loss, take profit, trailing stop, funding, sizing (percent with lots,
cash) and stops swept as grid axes;
``test_cuda_sim.py`` checks that each setting matters. ``ruin_cases`` run on wild bars of
their own, where many combos are ruined (equity reaches zero: liquidation inside a bar or
at a gap, exits that cannot pay their fixed fee, funding beyond the equity).
``ORDER_CASES`` are grids whose combos the kernel runs in another order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from barsweep.engine.strategies import import_strategy_module

TESTS = Path(__file__).resolve().parents[1]

N_BARS = 500
N_COMBOS = 64
BARS_SEED = 11
#: walk-forward windows (train, test of two windows) and PBO segments run on the GPU too
SPANS = ((0, 200), (200, 260), (60, 260), (260, 320))
N_SEGMENTS = 6

#: Execution settings; each strategy runs under two of them, ema_cross under all.
EXECUTIONS = {
    "close_long_fees": dict(fill="close", fees=0.001),
    "open_both_slip_fixed": dict(fill="next_open", direction="both", fees=0.0005,
                                 slippage=0.001, fixed_fee=1.0),
    "close_short_stop_target": dict(fill="close", direction="short", fees=0.001,
                                    stop_loss=0.02, take_profit=0.04),
    "open_both_trail_funding": dict(fill="next_open", direction="both", fees=0.001,
                                    trailing_stop=0.03, funding=True),
    "close_long_stop_target_trail": dict(fill="close", fees=0.001, stop_loss=0.015,
                                         take_profit=0.06, trailing_stop=0.03),
    "open_both_percent_lot": dict(fill="next_open", direction="both", fees=0.001,
                                  size={"type": "percent", "value": 0.6}, lot=7.0),
    "close_short_cash_quantity": dict(fill="close", direction="short", fixed_fee=1.0,
                                      slippage=0.001, size={"type": "cash", "value": 4000.0}),
    "open_both_leverage_margin": dict(fill="next_open", direction="both", fees=0.001,
                                      leverage=3.0, borrow_rate=0.5, maintenance_margin=0.3),
    "close_both_stop_entry_target": dict(fill="close", direction="both", slippage=0.001,
                                         take_profit=0.03, entry_order={
                                             "type": "stop", "offset": 0.002,
                                             "valid_bars": 4}),
    "open_long_atr_limit_risk": dict(fill="next_open", fees=0.001, stop_loss=0.03,
                                     atr_window=10, size={"type": "risk", "value": 0.05,
                                                          "atr": 2.0},
                                     entry_order={"type": "limit", "offset": 0.3,
                                                  "unit": "atr"}),
}

#: Each ``execution.conflict`` mode, for ``rule_hold`` (whose entries and exits hold
#: together). ``exit`` acts as ``opposite`` does (an exit kept while flat does nothing),
#: but takes its own branch of ``resolve_conflict``.
CONFLICTS = {
    f"{fill}_{direction}_conflict_{mode}": dict(fill=fill, direction=direction, fees=0.001,
                                                conflict=mode)
    for fill, direction, mode in (("next_open", "both", "opposite"),
                                  ("close", "both", "ignore"), ("next_open", "short", "entry"),
                                  ("close", "short", "exit"), ("next_open", "both", "adjacent"))
}


#: Entry orders for ``rule_account`` (it reads the pending order): a limit filled at the
#: next open, a stop at the close, both sides, a margin and a size.
ACCOUNT_ORDERS = {
    "open_both_limit": dict(fill="next_open", direction="both", fees=0.001,
                            entry_order={"type": "limit", "offset": 0.004, "valid_bars": 4}),
    "close_both_stop_levered": dict(fill="close", direction="both", fees=0.0005,
                                    leverage=2.0, maintenance_margin=0.3,
                                    size={"type": "percent", "value": 0.8},
                                    entry_order={"type": "stop", "offset": 0.003,
                                                 "valid_bars": 6}),
}


def _grid(**axes) -> dict[str, np.ndarray]:
    """The first N_COMBOS combos of the product of ``axes``."""
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {name: m.ravel()[:N_COMBOS] for name, m in zip(axes, mesh)}


PARAMS = {
    "buy_and_hold": {},
    "sma_cross": _grid(fast=np.arange(2, 10), slow=np.arange(12, 60, 6)),
    "ema_cross": _grid(fast=np.arange(2, 10), slow=np.arange(12, 60, 6)),
    "rsi": _grid(period=np.arange(3, 19, 2), lower=np.array([20.0, 25.0, 30.0, 35.0]),
                 upper=np.array([60.0, 70.0])),
    "trix": _grid(period=np.arange(3, 11), signal=np.arange(2, 10)),
    "macd": _grid(fast=np.arange(3, 7), slow=np.arange(12, 20, 2), signal=np.arange(3, 7)),
    "bollinger": _grid(period=np.arange(5, 37, 4), k=np.linspace(1.0, 2.75, 8)),
    "donchian": _grid(period=np.arange(3, 67)),
    "sma_trend": _grid(period=np.arange(3, 67)),
    "wma_band": _grid(period=np.arange(4, 20, 2), atr_period=np.arange(3, 11)),
    "rule_state": _grid(period=np.arange(4, 12, 2), lag=np.array([1, 4]),
                        hold=np.array([2, 6, 20]), k=np.array([0.01, 0.03])),
    "sma_hold": _grid(period=np.arange(4, 20, 2), hold=np.array([1, 3, 8, 30]),
                      k=np.array([0.01, 0.04])),
    "rule_hold": _grid(period=np.arange(4, 36, 2), hold=np.array([1, 2, 5, 12])),
    "rule_account": _grid(period=np.arange(4, 20, 2), floor=np.array([9_000.0, 10_050.0]),
                          k=np.array([0.002, 0.01])),
    "rule_calendar": _grid(period=np.arange(4, 20, 2), start=np.array([6, 13]),
                           stop=np.array([17, 22])),
}

#: Strategies registered by modules of the tests (docs/STRATEGIES.md's examples, one of
#: them a signal of the position state, in tests/engine; a host-hoisted one and one
#: written as rules, in tests/gpu), each imported by its name as a user's module is.
MODULES = {"sma_trend": "custom_strategy_example", "wma_band": "gpu_extra_strategy",
           "rule_state": "gpu_rule_strategy", "rule_hold": "gpu_rule_strategy",
           "rule_account": "gpu_rule_strategy", "rule_calendar": "gpu_calendar_strategy",
           "sma_hold": "signal_state_example"}
MODULE_FOLDERS = (TESTS / "engine", TESTS / "gpu")


def import_modules() -> None:
    """Import every module of :data:`MODULES` (each registers its strategies), with the
    folders of :data:`MODULE_FOLDERS` first on ``sys.path``."""
    for folder in reversed(MODULE_FOLDERS):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    for module in MODULES.values():
        import_strategy_module(module)


def cases() -> list[tuple[str, str, str, dict, dict]]:
    """``(case id, strategy, execution name, params, execution kwargs)`` of every case."""
    names = list(EXECUTIONS)
    out = []
    for i, strategy in enumerate(PARAMS):
        if strategy == "rule_hold":
            out += [(f"rule_hold-{name}", strategy, name, PARAMS[strategy], kwargs)
                    for name, kwargs in CONFLICTS.items()]
            continue
        if strategy == "rule_account":  # the pending order's state: limit and stop entries
            out += [(f"rule_account-{name}", strategy, name, PARAMS[strategy], kwargs)
                    for name, kwargs in ACCOUNT_ORDERS.items()]
            continue
        picks = names if strategy == "ema_cross" else [names[i % 4], names[(i + 2) % 4 + 1]]
        for execution in dict.fromkeys(picks):
            out.append((f"{strategy}-{execution}", strategy, execution, PARAMS[strategy],
                        EXECUTIONS[execution]))
    stops = _grid(fast=np.arange(3, 7), slow=np.arange(20, 44, 8),
                  stop_loss=np.array([0.01, 0.02, 0.04]), trailing_stop=np.array([0.02, 0.05]))
    out.append(("ema_cross-stops_as_grid_axes", "ema_cross", "open_both_slip_fixed", stops,
                EXECUTIONS["open_both_slip_fixed"]))
    orders = _grid(fast=np.arange(3, 7), slow=np.arange(20, 44, 8),
                   entry_offset=np.array([0.0, 0.004, 0.01]), valid_bars=np.array([1, 5]))
    out.append(("ema_cross-limit_orders_as_grid_axes", "ema_cross", "open_both_limit", orders,
                dict(fill="next_open", direction="both", fees=0.001, stop_loss=0.02,
                     entry_order={"type": "limit"})))
    levered = _grid(fast=np.arange(3, 7), slow=np.arange(20, 44, 8),
                    leverage=np.array([1.0, 2.0, 4.0]))
    out.append(("ema_cross-leverage_as_a_grid_axis", "ema_cross", "open_both_levered", levered,
                dict(fill="next_open", direction="both", fees=0.001, borrow_rate=0.5,
                     maintenance_margin=0.3)))
    # fast and slow drawn from one set of periods: combos share indicator rows across slots
    shared = _grid(fast=np.arange(4, 20, 2), slow=np.arange(4, 20, 2))
    keep = shared["fast"] != shared["slow"]
    out.append(("ema_cross-shared_rows", "ema_cross", "close_long_fees",
                {k: v[keep] for k, v in shared.items()}, EXECUTIONS["close_long_fees"]))
    # the position state in the held all-in long stretch too (long, no stops, no funding)
    out.append(("sma_hold-close_long_fees", "sma_hold", "close_long_fees", PARAMS["sma_hold"],
                EXECUTIONS["close_long_fees"]))
    return out


#: Wild bars for the ruin cases: 12% a bar, so shorts get squeezed; funding up to ~10%.
RUIN_BARS = dict(n_bars=300, seed=23, vol=0.12)


def ruin_bars(n_bars: int, seed: int, vol: float) -> dict[str, np.ndarray]:
    """Valid, positive OHLC bars volatile enough that many combos are ruined."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.002, vol, n_bars)))
    open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0.0, vol, n_bars))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, vol, n_bars)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, vol, n_bars)))
    funding = np.where(np.arange(n_bars) % 8 == 0, rng.normal(0.02, 0.04, n_bars), 0.0)
    return dict(open=open_, high=high, low=low, close=close, funding_rate=funding)


def ruin_cases() -> list[tuple[str, str, str, dict, dict]]:
    """Cases on :func:`ruin_bars` (``RUIN_BARS``), as :func:`cases` gives them."""
    return [
        ("ruin-ema_cross-close_short", "ema_cross", "close_short",
         PARAMS["ema_cross"], dict(fill="close", direction="short", fees=0.001)),
        ("ruin-rsi-open_both_stops_funding_fixed", "rsi", "open_both_stops_funding_fixed",
         PARAMS["rsi"], dict(fill="next_open", direction="both", fees=0.001, slippage=0.002,
                             fixed_fee=2_000.0, stop_loss=0.5, trailing_stop=0.6,
                             funding=True)),
        # slipped by 60%, every short is worth < 0 at its fill: liquidated at that close,
        # or at the open it was entered at (the gap branch)
        ("ruin-donchian-close_short_slipped", "donchian", "close_short_slipped",
         PARAMS["donchian"], dict(fill="close", direction="short", slippage=0.6)),
        ("ruin-bollinger-open_short_slipped", "bollinger", "open_short_slipped",
         PARAMS["bollinger"], dict(fill="next_open", direction="short", slippage=0.6)),
    ]


#: Argument rows each device fill is hoisted with, keyed by its kernel's arguments (periods
#: of 1 and warm-ups longer than ``HOIST_BARS`` included).
HOIST_ARGS = {
    ("period",): [(1,), (2,), (7,), (40,), (300,)],
    ("period", "k"): [(1, 2.0), (2, 2.0), (9, 1.5), (40, 0.5)],
    ("period", "signal"): [(1, 1), (3, 2), (5, 4), (12, 9)],
    ("fast", "slow", "signal"): [(1, 2, 1), (3, 8, 4), (8, 3, 2), (12, 26, 9)],
}
HOIST_BARS = 200


#: (case, strategy, grid out of locality order, execution): the combos are gathered into
#: locality order on the device and their metrics put back in the grid's order there.
ORDER_CASES = (
    ("ema_shuffled", "ema_cross", dict(fast=[7, 3, 9, 3, 5, 7, 2, 9, 5, 2, 4],
                                       slow=[30, 12, 12, 40, 30, 18, 40, 24, 12, 30, 18]),
     dict(fill="close", fees=0.001)),
    ("bollinger_stops_shuffled", "bollinger",
     dict(period=[20, 10, 15, 10, 20, 15, 10], k=[2.0, 1.5, 2.5, 2.5, 1.5, 2.0, 1.5],
          stop_loss=[0.02, 0.05, 0.01, 0.03, 0.04, 0.02, 0.06]),
     dict(fill="next_open", direction="both", fees=0.0005)),
)
