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

from ...engine.execution import STOP_PARAMS
from ...engine.portfolio import check_portfolio_execution
from ...errors import SpecError
from .sections import SECTION_CONFIG

__all__ = ["PORTFOLIO_AXES", "PORTFOLIO_LABEL", "PortfolioSpec", "members",
           "portfolio_axis_problems", "portfolio_problems"]

#: The one label of a portfolio store's ``symbol`` dim.
PORTFOLIO_LABEL = "portfolio"

#: The portfolio's settings that may also be grid axes (ints).
PORTFOLIO_AXES = ("max_positions",)


class PortfolioSpec(BaseModel):
    """``portfolio:``: the symbols held from one account, and how each entry is sized.

    ``symbols`` (default: ``data.symbols``; at least two) are aligned on the bars they
    all have (``data.align: inner``). ``weight: equal`` sizes each entry to ``1 / N``
    of the account's value (``1 / K`` with ``max_positions: K``, at most K positions
    open at once; ``max_positions`` may instead be a grid axis).
    """

    model_config = SECTION_CONFIG

    symbols: list[str] | None = Field(None, min_length=2)
    weight: str = "equal"
    max_positions: int | None = Field(None, ge=1, strict=True)
    rebalance: Any = None

    @field_validator("symbols", mode="before")
    @classmethod
    def _distinct(cls, value: Any) -> Any:
        if isinstance(value, list) and len(set(map(str, value))) < len(value):
            raise ValueError("a symbol is listed more than once")
        return value

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: str) -> str:
        if value == "inverse_vol":
            raise ValueError("inverse_vol is not yet supported: use weight: equal")
        if value != "equal":
            raise ValueError(f"expected equal, got {value!r}")
        return value

    @field_validator("rebalance")
    @classmethod
    def _rebalance(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("rebalancing is not yet supported: remove portfolio.rebalance")
        return value


def members(spec) -> list[str]:
    """The symbols of ``spec``'s portfolio (its own list, else ``data.symbols``)."""
    return list(spec.portfolio.symbols or spec.data.symbols)


def portfolio_axis_problems(expanded: Mapping[str, np.ndarray],
                            portfolio: PortfolioSpec | None) -> list[tuple[str, str]]:
    """Problems of the grid's portfolio axes: one without a ``portfolio`` section, one
    also set in the section, values that are not integers >= 1."""
    problems = []
    for key in PORTFOLIO_AXES:
        if key not in expanded:
            continue
        values = np.asarray(expanded[key], dtype=float)
        if portfolio is None:
            problems.append((f"grid.{key}", f"{key} is an axis of a portfolio run: add a "
                             f"portfolio section, or remove grid.{key}"))
        elif getattr(portfolio, key) is not None:
            problems.append((f"portfolio.{key}", f"{key} is also a grid axis; keep one"))
        elif np.any(values < 1) or np.any(values != np.round(values)):
            problems.append((f"grid.{key}", f"{key} must be integers >= 1, got "
                             f"{np.unique(values).tolist()}"))
    return problems


def portfolio_problems(spec) -> list[tuple[str, str]]:
    """What a spec with a ``portfolio`` section may not hold: walk-forward, a search,
    fewer than two symbols, more than the CUDA kernel takes with ``run.backend: cuda``,
    shorts, stops or funding (one problem each)."""
    if spec.portfolio is None:
        return []
    problems = []
    if spec.walk_forward is not None:
        problems.append(("portfolio", "walk-forward over a portfolio is not yet supported: "
                         "remove walk_forward or portfolio"))
    if spec.run.backend == "cuda":
        from ...engine.gpu_portfolio import portfolio_cuda_problem  # imports numba.cuda

        problem = portfolio_cuda_problem(len(members(spec)))
        if problem:
            problems.append(("run.backend", problem))
    if spec.search.method != "grid":
        problems.append(("portfolio", "a portfolio is swept over its whole grid only: "
                         "remove search or portfolio"))
    if len(members(spec)) < 2:
        problems.append(("portfolio.symbols", f"a portfolio needs at least two symbols, got "
                         f"{members(spec)}: list them in portfolio.symbols or data.symbols"))
    try:
        check_portfolio_execution(spec.execution)
    except SpecError as err:
        problems.append(("execution", str(err)))
    stops = [k for k in STOP_PARAMS if k in spec.grid]
    if stops:
        problems.append((f"grid.{stops[0]}", "a portfolio has no stops (stops per position "
                         "are not modelled): remove the stop axes"))
    return problems
