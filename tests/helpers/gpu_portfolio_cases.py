"""CUDA-vs-CPU portfolio cases, sized for the simulator: 4 symbols, ``ema_cross``, a rule
reading the position state and one reading the account's equity, fills at the close and at
the next open, fees, fixed fees and slippage, ``max_positions`` as one value and per
combo, one case where the account is ruined, and one trading both sides with funding,
leverage, borrowing, margin calls and a percent size in lots."""

from __future__ import annotations

import numpy as np

from barsweep.engine import get_strategy
from barsweep.engine.rules import Rule, compile_rule

from .bars import random_bars

N_BARS = 400
SYMBOLS = ("AAA", "BBB", "CCC", "DDD")
#: more combos than the simulated grid has threads: the grid-stride loop is used
N_COMBOS = 24

STATE_RULE = Rule("cross_above(close, bbands(close, n, k).upper) and position == 0",
                  "bars_held >= hold or close < entry_price * (1 - stop)")
STATE_KINDS = {"n": "int", "k": "float", "hold": "int", "stop": "float"}

#: A rule reading the account's equity (an 11-argument signal: the kernel marks the
#: account before the rules and scans no flat stretch ahead).
ACCOUNT_RULE = Rule("close > sma(close, n) and equity > floor",
                    "close < sma(close, n) or quantity * close > equity * share")
ACCOUNT_KINDS = {"n": "int", "floor": "float", "share": "float"}


def universe() -> dict[str, dict[str, np.ndarray]]:
    """The symbols' bars (aligned, seeded)."""
    return {s: random_bars(N_BARS, seed=30 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}


def strategy(name: str):
    """``ema_cross``, ``state_rule`` (:data:`STATE_RULE`, compiled) or ``account_rule``
    (:data:`ACCOUNT_RULE`)."""
    if name == "account_rule":
        return compile_rule(ACCOUNT_RULE, ACCOUNT_KINDS)
    return compile_rule(STATE_RULE, STATE_KINDS) if name == "state_rule" else get_strategy(name)


def _grid(**axes) -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {name: m.ravel()[:N_COMBOS] for name, m in zip(axes, mesh)}


PARAMS = {
    "ema_cross": _grid(fast=np.arange(2, 8), slow=np.array([12, 20, 30, 45])),
    "state_rule": _grid(n=np.array([8, 14, 20]), k=np.array([0.5, 1.0]),
                        hold=np.array([3, 10]), stop=np.array([0.01, 0.03])),
}

#: ``account_rule``'s combos (two cases of its own: the simulator is slow)
ACCOUNT_PARAMS = _grid(n=np.array([5, 10, 20]), floor=np.array([9_000.0, 9_800.0]),
                       share=np.array([0.3, 0.45, 2.0]))

EXECUTIONS = {
    "close_fees": dict(fill="close", fees=0.001),
    "open_costs": dict(fill="next_open", fees=0.0005, fixed_fee=1.0, slippage=0.0003),
    "ruin": dict(fill="close", init_cash=100.0, fixed_fee=30.0),
    "stops": dict(fill="next_open", fees=0.0005, slippage=0.0003, stop_loss=0.01,
                  take_profit=0.02, trailing_stop=0.015),
    # shorts, funding, leverage with borrowing and margin calls, a size within the weight
    "account": dict(fill="next_open", direction="both", funding=True, fees=0.0005,
                    slippage=0.0003, leverage=3.0, borrow_rate=0.5, maintenance_margin=0.3,
                    size=dict(type="percent", value=0.9), lot=0.5, stop_loss=0.03),
}

#: Cases run with more of sweep_portfolio's settings: weekly rebalancing to
#: inverse-volatility weights, entries by lowest volatility first.
SIZED = {"ema_cross-close_fees-rebalance": dict(rebalance="1W", weight="inverse_vol",
                                                lookback=24, priority="low_vol")}


def sized(case_id: str) -> dict:
    """The sweep_portfolio settings of ``case_id`` beyond its execution and limit."""
    return SIZED.get(case_id, {})

#: max_positions: none, one value, one per combo
LIMITS = {"all": None, "two": 2, "per_combo": np.arange(N_COMBOS) % 3 + 1}


def cases() -> list[tuple[str, str, dict, str, object]]:
    """``(case id, strategy, params, execution name, max_positions)`` of every case."""
    out = []
    for name in PARAMS:
        for execution in ("close_fees", "open_costs"):
            for limit in LIMITS:
                out.append((f"{name}-{execution}-{limit}", name, PARAMS[name], execution,
                            LIMITS[limit]))
    out.append(("ema_cross-ruin-all", "ema_cross", PARAMS["ema_cross"], "ruin", None))
    for name in PARAMS:
        out.append((f"{name}-stops-two", name, PARAMS[name], "stops", 2))
        out.append((f"{name}-account-all", name, PARAMS[name], "account", None))
    out.append(("account_rule-close_fees-two", "account_rule", ACCOUNT_PARAMS, "close_fees", 2))
    out.append(("account_rule-account-all", "account_rule", ACCOUNT_PARAMS, "account", None))
    out.append(("ema_cross-close_fees-rebalance", "ema_cross", PARAMS["ema_cross"],
                "close_fees", 2))
    return out
