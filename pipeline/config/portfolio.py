"""The spec's ``portfolio`` section: the strategy run on several symbols traded from one
cash account (docs/EXECUTION.md, "Portfolios"), and the checks it adds to a spec.

A portfolio run's results store has one ``symbol``, labelled :data:`PORTFOLIO_LABEL`,
whose metrics are the account's (docs/SPEC.md, "Portfolios").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, field_validator

from ...engine.core import ORDER_AXES
from ...engine.portfolio import PRIORITIES, check_portfolio_execution, parse_period
from ...errors import SpecError
from .sections import SECTION_CONFIG

__all__ = ["PORTFOLIO_AXES", "PORTFOLIO_LABEL", "REBALANCE_AXES", "PortfolioSpec", "members",
           "portfolio_axis_problems", "portfolio_problems", "rebalance_periods"]

#: The one label of a portfolio store's ``symbol`` dim.
PORTFOLIO_LABEL = "portfolio"

#: The grid axes of a rebalance period, by unit: ``rebalance_months: [0, 1, 3]`` sweeps
#: never, ``1M`` and ``3M`` (0: never).
REBALANCE_AXES = {"rebalance_days": "D", "rebalance_weeks": "W", "rebalance_months": "M",
                  "rebalance_quarters": "Q", "rebalance_years": "Y"}

#: The portfolio's settings that may also be grid axes (ints), with their least value.
AXIS_MIN = {"max_positions": 1, "vol_lookback": 2, **dict.fromkeys(REBALANCE_AXES, 0)}
PORTFOLIO_AXES = tuple(AXIS_MIN)


class PortfolioSpec(BaseModel):
    """``portfolio:``: the symbols held from one account, and how each entry is sized.

    ``symbols`` (default: ``data.symbols``; at least two) are aligned on the bars they
    all have (``data.align: inner``). ``weight: equal`` sizes each entry to ``1 / N``
    of the account's value (``1 / K`` with ``max_positions: K``, at most K positions
    open at once; ``max_positions`` may instead be a grid axis); ``weight:
    inverse_vol`` to the inverse-volatility weight over ``vol_lookback`` bars
    (default 20; it may be a grid axis). Same-bar entries are taken in the order of
    ``priority``: the symbols' order (default), a list of symbols first, ``low_vol``
    or ``momentum`` (over ``vol_lookback``). ``rebalance`` (e.g. ``1W``, ``1M``,
    ``3M``, ``1Y``: :mod:`barsweep.engine.portfolio.periods`) re-targets the held
    positions to their weight on the first bar of each period; absent: never. It may
    instead be a grid axis of one unit (:data:`REBALANCE_AXES`).
    """

    model_config = SECTION_CONFIG

    symbols: list[str] | None = Field(None, min_length=2)
    weight: str = "equal"
    max_positions: int | None = Field(None, ge=1, strict=True)
    vol_lookback: int | None = Field(None, ge=2, strict=True)
    priority: list[str] | str | None = None
    rebalance: str | None = None

    @field_validator("symbols", mode="before")
    @classmethod
    def _distinct(cls, value: Any) -> Any:
        if isinstance(value, list) and len(set(map(str, value))) < len(value):
            raise ValueError("a symbol is listed more than once")
        return value

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: str) -> str:
        if value not in ("equal", "inverse_vol"):
            raise ValueError(f"expected equal or inverse_vol, got {value!r}")
        return value

    @field_validator("priority")
    @classmethod
    def _priority(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in PRIORITIES:
            raise ValueError(f"expected a list of symbols, {' or '.join(PRIORITIES)}, "
                             f"got {value!r}")
        if isinstance(value, list) and len(set(value)) < len(value):
            raise ValueError("a symbol is listed more than once")
        return value

    def reads_lookback(self) -> bool:
        """Whether the weights or the priority read ``vol_lookback``."""
        return self.weight == "inverse_vol" or self.priority in PRIORITIES

    @field_validator("rebalance")
    @classmethod
    def _rebalance(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_period(value)
            except SpecError as err:
                raise ValueError(str(err)) from None
        return value


def members(spec) -> list[str]:
    """The symbols of ``spec``'s portfolio (its own list, else ``data.symbols``)."""
    return list(spec.portfolio.symbols or spec.data.symbols)


def portfolio_axis_problems(expanded: Mapping[str, np.ndarray],
                            portfolio: PortfolioSpec | None) -> list[tuple[str, str]]:
    """Problems of the grid's portfolio axes: one without a ``portfolio`` section, one
    also set in the section, more than one rebalance axis, values that are not integers
    >= 1 (>= 2 for ``vol_lookback``, >= 0 for a rebalance axis), a ``vol_lookback``
    that neither the weights nor the priority read."""
    problems = []
    swept = [key for key in REBALANCE_AXES if key in expanded]
    if len(swept) > 1:
        problems.append((f"grid.{swept[1]}", f"one rebalance axis at most: keep one of "
                         f"{', '.join(swept)}"))
    for key in PORTFOLIO_AXES:
        if key not in expanded:
            continue
        values = np.asarray(expanded[key], dtype=float)
        field = "rebalance" if key in REBALANCE_AXES else key
        if portfolio is None:
            problems.append((f"grid.{key}", f"{key} is an axis of a portfolio run: add a "
                             f"portfolio section, or remove grid.{key}"))
        elif getattr(portfolio, field) is not None:
            problems.append((f"portfolio.{field}", f"{field} is also a grid axis ({key}); "
                             f"keep one"))
        elif np.any(values < AXIS_MIN[key]) or np.any(values != np.round(values)):
            problems.append((f"grid.{key}", f"{key} must be integers >= {AXIS_MIN[key]}, "
                             f"got {np.unique(values).tolist()}"))
        elif key == "vol_lookback" and not portfolio.reads_lookback():
            problems.append(("grid.vol_lookback", _UNREAD))
    return problems


_UNREAD = (f"vol_lookback is read by weight: inverse_vol and priority: "
           f"{' or '.join(PRIORITIES)} only: remove it")


def rebalance_periods(params: dict[str, np.ndarray], section: str | None):
    """The rebalance period of each combo: ``params``' rebalance axis, popped (``3`` of
    ``rebalance_months`` is ``"3M"``, 0 is None), else the section's period.

    Examples
    --------
    >>> params = {"fast": np.array([5, 5]), "rebalance_months": np.array([0, 3])}
    >>> rebalance_periods(params, None), list(params)
    ([None, '3M'], ['fast'])
    """
    for key, unit in REBALANCE_AXES.items():
        if key in params:
            return [f"{int(v)}{unit}" if v else None for v in params.pop(key)]
    return section


def portfolio_problems(spec) -> list[tuple[str, str]]:
    """What a spec with a ``portfolio`` section may not hold: fewer than two
    symbols, more than the CUDA kernel takes with ``run.backend: cuda``, a priority
    naming others, a ``vol_lookback`` nothing reads, execution settings a portfolio
    does not model (``check_portfolio_execution``; one problem each)."""
    if spec.portfolio is None:
        return []
    problems = []
    section = spec.portfolio
    if isinstance(section.priority, list):
        others = [s for s in section.priority if s not in members(spec)]
        if others:
            problems.append(("portfolio.priority", f"{others} are not members of the "
                             f"portfolio {members(spec)}: list members only"))
    if section.vol_lookback is not None and not section.reads_lookback():
        problems.append(("portfolio.vol_lookback", _UNREAD))
    if spec.run.backend == "cuda":
        from ...engine.gpu import portfolio_cuda_problem  # imports numba.cuda

        problem = portfolio_cuda_problem(len(members(spec)))
        if problem:
            problems.append(("run.backend", problem))
    if len(members(spec)) < 2:
        problems.append(("portfolio.symbols", f"a portfolio needs at least two symbols, got "
                         f"{members(spec)}: list them in portfolio.symbols or data.symbols"))
    rebalances = section.rebalance is not None or any(k in spec.grid for k in REBALANCE_AXES)
    try:
        check_portfolio_execution(spec.execution, rebalances)
    except SpecError as err:
        problems.append(("execution", str(err)))
    problems += [(f"grid.{name}", "a portfolio enters at market only: remove the axis")
                 for name in ORDER_AXES if name in spec.grid]
    if rebalances and "size_value" in spec.grid:
        problems.append(("grid.size_value", "a rebalance re-targets each position to its "
                         "portfolio.weight: remove the axis"))
    return problems
