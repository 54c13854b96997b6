"""barsweep.engine.core: one symbol's simulation. The per-bar step (simulate) with its
fills, round trips and metric accumulators (numba, inlined into every kernel), the
execution settings, a kernel's inputs (inputs: the Bars and Combos records,
KernelInputs), the indicators hoisted out of the combos, the record of one combo rebuilt
in full (records: trade_dt, the trades written by field name by both kernels), the bars
in a year, and sweep (sweep_cpu: a block of combos on this process's CPU threads)."""

from .execution import (
    EXECUTION_AXES,
    ORDER_AXES,
    RISK_WITHOUT_STOP,
    STOP_PARAMS,
    WHOLE_AXES,
    Execution,
    RunSettings,
    benchmark_returns,
    check_size,
    check_stop,
    execution_of,
    hold_execution,
    leverage_column,
    order_columns,
    run_settings,
    size_column,
    split_combo,
)
from .fills import EXIT_REASONS
from .hoist import plan_rows, warm_up
from .inputs import BAR_COLUMNS, Bars, Combos, KernelInputs, prepare_inputs, read_only
from .metrics import (
    BEST_WHEN_IDLE,
    DD_ACC0,
    LOWER_IS_BETTER,
    METRIC_INDEX,
    METRIC_INFO,
    METRICS,
    N_METRICS,
    RET_ACC0,
    TRADE_ACC0,
    acc_drawdown,
    acc_returns,
    finalize,
)
from .records import PortfolioRecord, Record, portfolio_record, symbol_record, trade_dt
from .simulate import Outputs, segment_bounds
from .year import bars_in_year, bars_per_year

__all__ = [
    "BAR_COLUMNS", "BEST_WHEN_IDLE", "Bars", "Combos", "DD_ACC0", "EXECUTION_AXES", "EXIT_REASONS",
    "Execution", "KernelInputs", "LOWER_IS_BETTER", "METRICS", "METRIC_INDEX", "METRIC_INFO",
    "N_METRICS", "ORDER_AXES", "Outputs", "PortfolioRecord", "RET_ACC0", "RISK_WITHOUT_STOP",
    "Record", "RunSettings", "STOP_PARAMS", "TRADE_ACC0", "WHOLE_AXES", "acc_drawdown",
    "acc_returns", "bars_in_year", "bars_per_year", "benchmark_returns", "check_size",
    "check_stop", "execution_of", "finalize", "hold_execution", "leverage_column",
    "order_columns", "plan_rows", "portfolio_record", "prepare_inputs", "read_only",
    "run_settings", "segment_bounds", "size_column", "split_combo", "symbol_record",
    "trade_dt", "warm_up",
]
