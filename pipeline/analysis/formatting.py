"""Numbers for people: how tables and pictures print metrics and parameters.

Pure functions of one value each. Returns and drawdowns read as percentages, other
metrics with three significant digits, counts with thousands separators, and a
parameter as the grid wrote it (``40``, ``0.03``), whatever its stored dtype. Scripts get
the exact numbers from ``--json``; these are for eyes.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: Metrics that are fractions of something (equity, trades, bars): printed in percent.
PERCENT = frozenset({"total_return", "cagr", "volatility", "max_drawdown", "win_rate",
                     "avg_trade_return", "exposure", "alpha"})

#: Metrics that count things: printed as whole numbers.
COUNTS = frozenset({"n_trades", "ruined"})

#: How a missing (NaN or None) value prints.
MISSING = "-"


def _missing(value) -> bool:
    return value is None or (isinstance(value, numbers.Real) and math.isnan(value))


def significant(value, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, thousands separated; never fewer
    integer digits than it has.

    Examples
    --------
    >>> [significant(v) for v in (1.0234, -0.08531, 12.0, 9.996, 1234.5, 0.0)]
    ['1.02', '-0.0853', '12.0', '10.0', '1,234', '0']
    >>> significant(float("nan")), significant(float("-inf")), significant(3.2e-7)
    ('-', '-inf', '3.20e-07')
    """
    if _missing(value):
        return MISSING
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits - 1}e}")  # 9.996 -> 10.0: the magnitude after rounding
    magnitude = math.floor(math.log10(abs(rounded)))
    if magnitude >= digits - 1:
        return f"{value:,.0f}"
    if magnitude < -4:
        return f"{value:.{digits - 1}e}"
    return f"{rounded:,.{digits - 1 - magnitude}f}"


def percent(value, digits: int = 3) -> str:
    """A fraction as a percentage of ``digits`` significant digits.

    Examples
    --------
    >>> [percent(v) for v in (0.351, -0.0052, 2.54, 12.3456, -1.0)]
    ['35.1%', '-0.520%', '254%', '1,235%', '-100%']
    """
    if _missing(value):
        return MISSING
    return f"{significant(float(value) * 100.0, digits)}%"


def count(value) -> str:
    """A count with thousands separators.

    Examples
    --------
    >>> count(1234.0), count(7), count(float("nan"))
    ('1,234', '7', '-')
    """
    if _missing(value):
        return MISSING
    if isinstance(value, numbers.Real) and math.isinf(value):
        return significant(value)
    return f"{round(float(value)):,}"


def param(value) -> str:
    """A parameter value as a grid writes it: ``40`` (not ``40.0``), ``0.03``.

    Examples
    --------
    >>> param(40), param(40.0), param(0.030000000000000002), param(1e-05), param("MSFT")
    ('40', '40', '0.03', '1e-05', 'MSFT')
    """
    if _missing(value):
        return MISSING
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.12g}"
    return str(value)


def metric(name: str, value) -> str:
    """One metric's value as people read it: a percentage, a count or three significant
    digits, by ``name``.

    Examples
    --------
    >>> metric("cagr", 0.351), metric("n_trades", 1234.0), metric("sharpe", 1.0216)
    ('35.1%', '1,234', '1.02')
    """
    if name in PERCENT:
        return percent(value)
    if name in COUNTS:
        return count(value)
    return significant(value)


def params_text(params: dict) -> str:
    """``fast 10, slow 40``: parameters and their values, as a title says them.

    Examples
    --------
    >>> params_text({"fast": 10, "slow": 40.0, "stop_loss": 0.05})
    'fast 10, slow 40, stop_loss 0.05'
    """
    return ", ".join(f"{k} {param(v)}" for k, v in params.items())


def metrics_text(metrics: dict) -> str:
    """A one-line summary of a run's key metrics (those present), as a title says them.

    Examples
    --------
    >>> metrics_text({"total_return": 0.5, "sharpe": 1.234, "max_drawdown": -0.2,
    ...               "n_trades": 12.0})
    'total return 50.0%, sharpe 1.23, max drawdown -20.0%, 12 trades'
    """
    parts = []
    for name in ("total_return", "cagr", "sharpe", "max_drawdown"):
        if name in metrics:
            parts.append(f"{name.replace('_', ' ')} {metric(name, metrics[name])}")
    if "n_trades" in metrics:
        parts.append(f"{count(metrics['n_trades'])} trades")
    return ", ".join(parts)


_SUFFIXES = ("_smooth", "_median", "_mean", "_min")


def column_metric(column: str) -> str:
    """The metric a column of a ranking shows: ``sharpe_smooth``, ``sharpe_median`` and
    ``sharpe[MSFT]`` are sharpe.

    Examples
    --------
    >>> column_metric("cagr[MSFT]"), column_metric("sharpe_smooth_median"), column_metric("psr")
    ('cagr', 'sharpe', 'psr')
    """
    name = column.split("[", 1)[0]
    while name.endswith(_SUFFIXES):
        name = name[:name.rindex("_")]
    return name


def cells(frame, identity) -> pd.DataFrame:
    """``frame`` as text for people: the ``identity`` columns (symbol, window, sample,
    the parameters) as labels, every other column by :func:`metric` of its metric
    (:func:`column_metric`). Same index and columns.

    Examples
    --------
    >>> import pandas as pd
    >>> f = pd.DataFrame({"symbol": ["A"], "slow": [40.0], "cagr": [0.12], "sharpe": [1.0]})
    >>> cells(f, ["symbol", "slow"]).iloc[0].tolist()
    ['A', '40', '12.0%', '1.00']
    """
    import pandas as pd

    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        if column in identity:
            out[column] = [param(v) for v in frame[column]]
        else:
            name = column_metric(column)
            out[column] = [metric(name, v) for v in frame[column]]
    return out


def ranking_cells(frame, columns, reference=None, label: str = "buy&hold"):
    """A ranking (:func:`barsweep.pipeline.analysis.rank.rank`) as text for people: its identity
    columns (symbol, window, sample, the parameters: every column that is not a metric
    or computed from one), then ``columns`` (metric columns, those present), each cell
    formatted by :func:`cells`; then the ``reference`` rows (buy and hold: labels and
    metrics), unranked (index ``-``), ``label`` in the first parameter column; where
    there is none (a store of a strategy without parameters), ``label`` is their index,
    every column holding what its name says.

    Returns
    -------
    pandas.DataFrame
        Text cells, indexed by rank.
    """
    import pandas as pd

    from ...engine import METRICS

    known = {*METRICS, "psr", "dsr"}
    identity = [c for c in frame.columns if column_metric(c) not in known]
    cols = identity + [c for c in dict.fromkeys(columns) if c in frame.columns]
    table = cells(frame[cols], identity)
    if reference is None or not len(reference):
        return table
    labels = [c for c in identity if c in reference.columns]
    params = [c for c in identity if c not in labels]
    ref = cells(reference.reindex(columns=cols), labels)
    for c in params:
        ref[c] = ""
    if params:
        ref[params[0]] = label
    ref.index = pd.Index(["-" if params else label] * len(ref), name=table.index.name)
    return pd.concat([table, ref])
