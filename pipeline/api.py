"""Sweeps from Python, without a YAML file: :func:`sweep` (``barsweep.sweep``) builds
the spec that ``barsweep run`` would read and runs it as that command does
(:func:`~barsweep.pipeline.run.orchestrate.run_spec`: spec validation, blocks, Dask,
Zarr), returning the results Dataset."""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import DataError, DataWarning, SpecError


def sweep(bars_or_store: str | os.PathLike, strategy: str | Mapping, grid: Mapping[str, Any],
          constraints: Iterable[str] = (), execution: Mapping | None = None, *,
          symbols: str | Iterable[str] | None = None, timeframe: str | None = None,
          out: str | os.PathLike | None = None, client=None, cluster: Any = None,
          n_workers: int | None = None, overwrite: bool = False, progress: bool = False,
          price_column: str | None = None, ohlc_from_close: bool = False,
          time_format: str | None = None, drop_nan: bool = False, force: bool = False,
          sort: bool = False, **spec_sections: Any):
    """Sweep ``strategy`` over ``grid`` and return the results as an ``xarray.Dataset``.

    Parameters
    ----------
    bars_or_store : str, os.PathLike, pandas.DataFrame, mapping or xarray.Dataset
        A bar store (``barsweep data import/synth`` writes one), or bars in memory: a
        DataFrame of one symbol (a DatetimeIndex or a time column; open, high, low,
        close), a mapping of symbol to such DataFrames, or a Dataset from ``open_bars``.
        Bars in memory are validated as ``barsweep data import`` validates a file and
        stored beside ``out`` (``<out>.bars/``), or in the temporary directory; what the
        import says (columns ignored, the choices below, an adjusted close left unused,
        moves that look like unadjusted splits) is issued as a `DataWarning` per symbol,
        in the words ``barsweep data import`` prints.
    strategy : str or mapping
        A registered strategy's name, or rules: ``{"entry": ..., "exit": ...}`` (and
        optionally ``short_entry``, ``short_exit``, ``name``; docs/RULES.md), whose
        parameters are the grid's axes.
    grid : mapping of parameter name to values
        A ``range`` (its values, stop excluded as in Python), a list or array of values,
        or ``{"start", "stop", "step"}`` (stop included, as in a spec).
    constraints : iterable of str
        Expressions over the parameters, e.g. ``"fast < slow"``.
    execution : mapping, optional
        The spec's ``execution`` section (``fill``, ``fees``, ...).
    symbols, timeframe : the bars to sweep (both required).
    out : path, optional
        The results store to write; None keeps the results in memory (the store is
        written to a temporary directory, loaded and removed).
    client : distributed.Client, optional
        Run on this client; else a cluster is started as ``barsweep run`` would
        (``cluster``: the spec's ``cluster`` section, default auto: threads of this
        process for a small sweep, worker processes for a large one; ``n_workers``).
    price_column, ohlc_from_close, time_format, drop_nan, force, sort
        For bars in memory, the options of ``barsweep data import`` (see
        :func:`barsweep.datasets.import_file`), the same for every symbol:
        ``price_column="adj_close"`` stores an adjusted close column (any case and
        spacing: ``Adj Close``) as the close and scales open, high and low by it;
        ``ohlc_from_close`` takes close-only bars; ``time_format`` reads a text time
        column (``"%d/%m/%Y"``); ``drop_nan`` drops rows with missing values; ``force``
        takes bars whose spacing is not ``timeframe``; ``sort`` sorts rows by time. A bar
        store was imported already: these are refused with one.
    **spec_sections
        Further spec sections or data keys: ``data`` keys ``start``, ``end``,
        ``year_days``, ``align``; sections ``walk_forward``, ``analysis``, ``run``,
        ``portfolio`` (e.g. ``portfolio={"max_positions": 2}``: docs/SPEC.md),
        ``modules``, ``search`` (e.g. ``search={"method": "halving", "budget": 20000}``:
        docs/SEARCH.md).

    Returns
    -------
    xarray.Dataset
        As :func:`open_results` gives it (lazy when ``out`` is given).
    """
    from .run.orchestrate import Voice, run_spec
    from .run.results import open_results

    options = {"price_column": price_column, "ohlc_from_close": ohlc_from_close,
               "time_format": time_format, "drop_nan": drop_nan, "force": force, "sort": sort}
    symbols, timeframe = bars_named(bars_or_store, symbols, timeframe, options)
    scratch = None if out is not None else tempfile.mkdtemp(prefix="barsweep-")
    target = os.fspath(out) if out is not None else os.path.join(scratch, "results.zarr")
    try:
        store = bars_or_store
        if not isinstance(store, str | os.PathLike):  # bars in memory: imported beside out
            store = f"{target}.bars"
            store_frames(bars_or_store, symbols, timeframe, store, replace=overwrite, **options)
        data = {"store": os.fspath(store), "symbols": symbols, "timeframe": timeframe}
        run_spec(sweep_spec(data, strategy, grid, constraints, execution, spec_sections,
                            target, cluster),
                 overwrite=overwrite, client=client, n_workers=n_workers,
                 voice=Voice(progress=progress))
        ds = open_results(target)
        return ds if scratch is None else ds.load()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def sweep_spec(data: dict, strategy: str | Mapping, grid: Mapping[str, Any],
               constraints: Iterable[str], execution: Mapping | None,
               sections: Mapping[str, Any], out: str, cluster: Any):
    """The spec :func:`sweep` runs: the sections a YAML spec would hold, validated as
    one (:func:`~barsweep.pipeline.config.model.parse_spec`, source ``sweep()``).
    ``data`` is its bars (store, symbols, timeframe); ``sections`` its further sections
    and data keys (``start``, ``end``, ``year_days``, ``align``)."""
    from .config.model import parse_spec

    sections = dict(sections)
    data = {**data, **{k: sections.pop(k) for k in ("start", "end", "year_days", "align")
                       if k in sections}}
    spec = {
        "data": data,
        "strategy": strategy_entry(strategy),
        "grid": {name: grid_entry(values) for name, values in grid.items()},
        "constraints": list(constraints),
        "execution": dict(execution or {}),
        **sections,
        "run": {**sections.get("run", {}), "out": out},
    }
    if cluster is not None:
        spec["cluster"] = cluster
    return parse_spec(spec, source="sweep()")


def strategy_entry(strategy: str | Mapping) -> str | dict:
    """The spec's ``strategy`` entry: a name as it is; rules given as ``{"entry", "exit",
    ..., "name"}`` (or a :class:`barsweep.engine.rules.Rule`) as ``{"name", "rule"}``."""
    if isinstance(strategy, str):
        return strategy
    rules = strategy if isinstance(strategy, Mapping) else vars(strategy)
    if "rule" in rules:  # already the spec's form
        return dict(rules)
    name = rules.get("name")
    entry = {"rule": {k: v for k, v in rules.items() if k != "name" and v is not None}}
    return entry if name is None else {"name": name, **entry}


def bars_named(bars_or_store: Any, symbols: str | Iterable[str] | None,
               timeframe: str | None, options: Mapping[str, Any]) -> tuple[list[str], str]:
    """The symbols and timeframe :func:`sweep` sweeps: as given, else those of bars in
    memory (a Dataset's, a mapping's keys); SpecError when they remain unknown, or when
    import ``options`` come with a bar store (its bars were imported already)."""
    in_memory = not isinstance(bars_or_store, str | os.PathLike)
    asked = [name for name, value in options.items() if value not in (None, False)]
    if asked and not in_memory:
        raise SpecError(f"sweep(): {', '.join(f'{n}=' for n in asked)} apply to bars in "
                        f"memory; the bars of store {os.fspath(bars_or_store)} were imported "
                        "already (barsweep data import --replace, with its options, imports "
                        "them again)")
    if in_memory and hasattr(bars_or_store, "data_vars"):  # open_bars' Dataset
        symbols = symbols or bars_or_store["symbol"].values.tolist()
        timeframe = timeframe or bars_or_store.attrs.get("timeframe")
    if in_memory and isinstance(bars_or_store, Mapping):
        symbols = symbols or list(bars_or_store)
    if symbols is None or timeframe is None:
        raise SpecError("sweep(): give symbols= and timeframe= (the bars to sweep)")
    return ([symbols] if isinstance(symbols, str) else list(symbols)), timeframe


def store_frames(bars: Any, symbols: list[str], timeframe: str, store: str, *,
                 replace: bool = False, **options: Any) -> None:
    """Write bars held in memory into a bar store through the importer (every check and
    option of ``barsweep data import``: `options` are `import_file`'s), one symbol at a
    time, by way of a Parquet file.

    What the import says that ``barsweep data import`` prints (its notes and warnings) is
    issued as a `DataWarning`: ``"AAPL: note: ignored column(s): ['Ticker']"``,
    ``"AAPL: column 'Adj Close' holds adjusted prices, ..."``.
    """
    import pandas as pd

    from ..datasets.importer import import_file

    with tempfile.TemporaryDirectory(prefix="barsweep-bars-") as tmp:
        for symbol in symbols:
            frame = _frame_of(bars, symbol)
            if not isinstance(frame, pd.DataFrame):
                raise SpecError(f"sweep(): bars of {symbol!r} must be a pandas DataFrame, got "
                                f"{type(frame).__name__}")
            path = os.path.join(tmp, f"{symbol}.parquet")
            # an unnamed index that is not times is row labels (e.g. after iloc[::-1]), not data
            keep_index = (frame.index.name is not None
                          or isinstance(frame.index, pd.DatetimeIndex))
            frame.to_parquet(path, index=keep_index)
            try:
                report = import_file(path, store, symbol, timeframe, replace=replace,
                                     **options)
            except DataError as exc:  # named as the user knows the bars, not by a temp file
                raise DataError(str(exc).replace(path, f"sweep(): bars of {symbol!r}")) from None
            told = ([f"{symbol}: note: {note}" for note in report.notes]
                    + [f"{symbol}: {warning}" for warning in report.warnings])
            for line in told:
                warnings.warn(line, DataWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning issued by the calling function at the
    first frame outside barsweep (the user's call of ``sweep``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    own = {here, os.path.dirname(here)}  # this module's folder and the package root's
    frame, level = inspect.currentframe().f_back, 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) in own:
        frame, level = frame.f_back, level + 1
    return level


def _frame_of(bars: Any, symbol: str):
    if hasattr(bars, "data_vars"):  # open_bars' Dataset: time as int64 ns (or datetime64)
        import pandas as pd

        one = bars.sel(symbol=symbol)
        time = one["time"].values
        index = pd.DatetimeIndex(time.astype("datetime64[ns]"), name="time")
        return pd.DataFrame({c: one[c].values for c in one.data_vars}, index=index)
    if isinstance(bars, Mapping):
        if symbol not in bars:
            raise SpecError(f"sweep(): no bars for symbol {symbol!r}; given: "
                            f"{', '.join(map(str, bars))}")
        return bars[symbol]
    return bars


def grid_entry(values: Any) -> Any:
    """One grid axis as a spec entry: a ``range`` becomes ``{start, stop, step}`` with
    the stop it reaches, an array its list; lists and ranges-as-mappings pass."""
    if isinstance(values, range):
        if len(values) == 0:
            raise SpecError(f"grid: {values!r} is empty")
        return {"start": values.start, "stop": values[-1], "step": values.step}
    if hasattr(values, "tolist"):
        return values.tolist()
    return values
