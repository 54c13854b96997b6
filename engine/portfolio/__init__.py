"""barsweep.engine.portfolio: one account over many symbols. sweep (sweep_portfolio_with:
a block of portfolio combos, each run by the CPU's runner or the GPU's), sim (the per-bar
kernel), orders, book (each combo's account settings), weights (sizing), periods
(rebalancing). Its record (one combo in full) is
barsweep.engine.core.records'."""

from ..core.records import PortfolioRecord, portfolio_record
from .book import Book
from .orders import N_STATE, N_SYMBOL_METRICS, SYMBOL_METRICS
from .periods import parse_period, rebalance_table
from .sweep import check_portfolio_execution, portfolio_kernel, sweep_portfolio_with
from .weights import PRIORITIES, WEIGHTS, Sizing, sizing_rows

__all__ = [
    "N_STATE", "N_SYMBOL_METRICS", "PRIORITIES", "SYMBOL_METRICS", "WEIGHTS", "Book",
    "PortfolioRecord", "Sizing", "check_portfolio_execution", "parse_period",
    "portfolio_kernel", "portfolio_record", "rebalance_table", "sizing_rows",
    "sweep_portfolio_with",
]
