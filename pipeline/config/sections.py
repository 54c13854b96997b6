"""The spec's ``data``, ``run`` and ``analysis`` sections: which bars, where and how the
sweep runs, and what it keeps for the analyses after it.

:class:`~barsweep.pipeline.config.model.Spec` holds them beside the strategy, the grid and
the other sections.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from ...datasets.timeframes import timeframe_seconds
from ...errors import DataError, Problems
from .count import MAX_COUNTABLE
from .files import PathStr
from .sizes import parse_bytes

__all__ = ["MAX_COMBOS", "SECTION_CONFIG", "AnalysisSpec", "DataSpec", "RunSpec"]

#: Every section refuses unknown keys and is frozen once validated.
SECTION_CONFIG = ConfigDict(extra="forbid", frozen=True)


class DataSpec(BaseModel):
    """Which bars to sweep over.

    ``start`` and ``end`` are ISO dates or datetimes (YAML dates are accepted and kept as
    ISO strings). ``year_days`` sets the days a year of the timeframe's bars (365 for
    crypto, 252 for daily equities); unset, the run measures it from the bars
    (:func:`barsweep.engine.core.year.bars_per_year`) and stores what it used. ``align``: ``own``
    (default) runs each symbol over its own bars within start/end, however many; ``inner``
    over the range every symbol covers (from the latest first bar to the earliest last).
    """

    model_config = SECTION_CONFIG

    store: PathStr
    symbols: list[str] = Field(min_length=1)
    timeframe: str
    start: str | None = None
    end: str | None = None
    year_days: float | None = Field(None, gt=0, strict=True, allow_inf_nan=False)
    align: Literal["own", "inner"] = "own"

    @field_validator("symbols", mode="before")
    @classmethod
    def _one_symbol(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("symbols")
    @classmethod
    def _distinct_symbols(cls, value: list[str]) -> list[str]:
        if any(not s.strip() for s in value):
            raise ValueError("symbols must not be empty strings")
        duplicated = sorted({s for s in value if value.count(s) > 1})
        if duplicated:
            raise ValueError(f"symbol {duplicated[0]!r} is listed more than once")
        return value

    @field_validator("timeframe")
    @classmethod
    def _timeframe(cls, value: str) -> str:
        try:
            timeframe_seconds(value)
        except DataError as err:
            raise ValueError(str(err)) from None
        return value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _iso_time(cls, value: Any) -> Any:
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, str):
            _parse_time(value)
        return value

    @model_validator(mode="after")
    def _start_before_end(self) -> DataSpec:
        if self.start is not None and self.end is not None:
            if _parse_time(self.start) >= _parse_time(self.end):
                raise Problems(
                    [("data.end", f"end {self.end!r} must be after start {self.start!r}")]
                )
        return self


#: The default of ``run.max_combos``: larger grids are refused unless it is raised.
MAX_COMBOS = 10**9


class RunSpec(BaseModel):
    """Where and how the sweep runs: backend, combos per block, output store.

    ``block_size: auto`` (default) sizes blocks from the grid, the bars and the workers
    (see :func:`barsweep.pipeline.run.plan.auto_block_size`). ``max_combos`` bounds the
    combos of a run (the grid's box, before constraints, times the symbols): a larger
    spec is refused before anything runs, a guard against a mistyped range.
    ``progress_every``: seconds between two progress lines when stderr is not a terminal
    (a log); a terminal's line is redrawn in place.
    ``memory_per_block``: the bytes a block may take (an int or ``"2GiB"``); None
    (default) is :data:`~barsweep.pipeline.run.memory.MEMORY_SHARE` of a worker thread's
    memory limit (:func:`~barsweep.pipeline.run.memory.worker_budget`).
    """

    model_config = SECTION_CONFIG

    backend: Literal["auto", "cpu", "cuda"] = "auto"
    block_size: Literal["auto"] | PositiveInt = "auto"
    out: PathStr = Field("results.zarr", validate_default=True)
    max_combos: int = Field(MAX_COMBOS, gt=0, le=MAX_COUNTABLE, strict=True)
    worker_timeout: float = Field(60.0, gt=0, allow_inf_nan=False)
    progress_every: float = Field(5.0, gt=0, allow_inf_nan=False)
    memory_per_block: int | str | None = None

    @field_validator("memory_per_block", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> int | None:
        return None if value is None else parse_bytes(value)


class AnalysisSpec(BaseModel):
    """What a run keeps beyond the metrics for the analyses after it.

    ``pbo_segments``: S equal segments of each symbol's bars over which every combo's
    return sums are stored (``seg_sum_r``, ``seg_sum_r2``), the input of the probability
    of backtest overfitting (:func:`barsweep.pipeline.analysis.robust.pbo`); an even number, or 0
    for none. A walk-forward run keeps none (its windows are its out-of-sample test).
    """

    model_config = SECTION_CONFIG

    pbo_segments: int = Field(10, ge=0, le=32, strict=True)

    @field_validator("pbo_segments")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"pbo_segments must be even (two halves per split) or 0, "
                             f"got {value}")
        return value


def _parse_time(text: str) -> datetime:
    """`text` as a naive UTC datetime; ValueError if it is not an ISO date or datetime."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"expected an ISO date or datetime such as '2021-01-31' or "
            f"'2021-01-31T12:00:00Z', got {text!r}"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


class RuleTexts(BaseModel):
    """A strategy's rules (docs/RULES.md): ``entry`` and ``exit``, and the short side's
    (default: the exit rule enters short, the entry rule exits it)."""

    model_config = SECTION_CONFIG

    entry: str
    exit: str
    short_entry: str | None = None
    short_exit: str | None = None

    @field_validator("entry", "exit", "short_entry", "short_exit", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: Any) -> Any:
        """YAML reads a rule written ``true`` or ``false`` as a boolean."""
        return str(value) if isinstance(value, bool) else value


class RuleSpec(BaseModel):
    """``strategy:`` given as rules instead of a registered strategy's name."""

    model_config = SECTION_CONFIG

    name: str = Field("rule", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    rule: RuleTexts
