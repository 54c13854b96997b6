"""One combo of a portfolio store rebuilt in full: the members' bars, the execution
settings and the portfolio's sizing from the spec stored with the results, run by
:func:`barsweep.engine.backtest.portfolio.backtest_portfolio`, its account's metrics and
each member's ``n_trades`` and ``exposure`` checked against the store's."""

from __future__ import annotations

import math

from ...engine import METRICS
from ...engine.backtest import PortfolioResult, backtest_portfolio
from ...engine.portfolio import SYMBOL_METRICS
from ...errors import MismatchError
from ..config.portfolio import PORTFOLIO_AXES, rebalance_periods


def rebuild_portfolio(cell, spec, ppy: float, bars: dict, params: dict,
                      span: tuple[int, int] | None = None) -> PortfolioResult:
    """The combo ``params`` (every parameter's value, the portfolio's axes included) of
    a portfolio store, rebuilt with its stored ``spec`` and bars per year ``ppy`` over
    ``bars`` (each member's, as the run read them) and the bars its cell ran (``span``:
    a walk-forward window's sample, a search rung's; None: every bar), then checked
    against ``cell`` (:meth:`~.kinds.StoreKind.cell`: the store at that combo).

    Raises
    ------
    MismatchError
        The rebuilt metrics, or a member's ``n_trades`` or ``exposure``, differ from the
        store's (the bars or barsweep changed since the run), naming the value.
    """
    strategy_params = {k: v for k, v in params.items() if k not in PORTFOLIO_AXES}
    section = spec.portfolio
    max_positions = params.get("max_positions", section.max_positions)
    rebalance = rebalance_periods({k: [v] for k, v in params.items()}, section.rebalance)
    result = backtest_portfolio(bars, spec.strategy_def, strategy_params, ppy=ppy,
                                max_positions=max_positions,
                                rebalance=rebalance[0] if isinstance(rebalance, list)
                                else rebalance, weight=section.weight,
                                lookback=params.get("vol_lookback", section.vol_lookback),
                                priority=section.priority, span=span,
                                **spec.execution.model_dump())
    check_portfolio(cell, params, result)
    return result


def check_portfolio(cell, params: dict, result: PortfolioResult) -> None:
    """MismatchError when ``result``'s metrics or its members' ``n_trades`` and
    ``exposure`` differ from those the store's ``cell`` of combo ``params`` holds."""
    stored = cell[list(METRICS)].load()
    pairs = [(name, float(stored[name]), result.metrics[name]) for name in METRICS]
    for name in SYMBOL_METRICS:
        var = f"member_{name}"
        if var in cell:
            column = cell[var].load()
            pairs += [(f"{symbol}'s {name}", float(column.sel(member=symbol)),
                       float(result.members.loc[symbol, name]))
                      for symbol in result.members.index]
    for name, kept, rebuilt in pairs:
        if not (kept == rebuilt or (math.isnan(kept) and math.isnan(rebuilt))):
            raise MismatchError(f"the rebuilt portfolio combo {params} has {name} "
                                f"{rebuilt!r}, the store {kept!r}: the bars or barsweep "
                                f"changed since the run")
