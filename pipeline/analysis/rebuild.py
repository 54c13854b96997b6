"""One combo of a results store rebuilt in full: its bars, execution settings and
``year_days`` read from the spec stored with the results, its metrics checked against
the store's."""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterator

from ...engine import METRICS, backtest
from ...errors import BarsweepError, MismatchError, ResultsError, SpecError

logger = logging.getLogger(__name__)


def stored_spec(ds, what: str = "the results store", *, strategy: bool = True):
    """The spec a results Dataset was made by (its ``spec`` attribute) and its bars per
    year (the ``periods_per_year`` attribute, or the spec's timeframe and year_days).

    The spec's ``modules`` are not imported (a store is data): a strategy of theirs must
    have been imported when the user asked (``--import-modules``). With ``strategy``
    False, the spec is read without its strategy (as buy and hold, its grid and
    constraints dropped): its data, execution and portfolio, whatever code it names.
    """
    from ...datasets import periods_per_year
    from ..config.files import load_yaml
    from ..config.model import parse_spec  # here: the spec module imports modules that import this

    if "spec" not in ds.attrs:
        raise SpecError(f"{what}: the results store has no 'spec' attribute (the run's spec "
                        f"as YAML), so its strategy, execution and bars are unknown")
    source = "the results store's spec"
    text = ds.attrs["spec"]
    if not strategy:
        data = load_yaml(text, source)
        if isinstance(data, dict):
            text = {k: v for k, v in data.items()
                    if k not in ("modules", "module_dir", "grid", "constraints", "search")}
            text["strategy"] = "buy_and_hold"
    else:
        _modules_imported(load_yaml(text, source), what)
    spec = parse_spec(text, source=source, modules=False)
    ppy = float(ds.attrs.get("periods_per_year")
                or periods_per_year(spec.data.timeframe, spec.data.year_days))
    return spec, ppy


def _modules_imported(data, what: str) -> None:
    """Refuse, in one line, a stored spec whose modules are not imported in this process
    (``--import-modules`` imports them)."""
    from ...engine.strategies import imported_from

    if not isinstance(data, dict) or not isinstance(data.get("modules"), list):
        return
    root = data.get("module_dir") if isinstance(data.get("module_dir"), str) else None
    missing = [str(m) for m in data["modules"] if not imported_from(str(m), root)]
    if missing:
        raise SpecError(f"{what}: the store's strategy comes from the module"
                        f"{'s' * (len(missing) > 1)} {', '.join(missing)}"
                        f"{f' in {root}' if root else ''}, Python code that reading a store "
                        "does not import unless asked: pass --import-modules (the files are "
                        "checked against the ones the run hashed)")


@contextlib.contextmanager
def compile_note(results, what: str) -> Iterator[None]:
    """Around a command that rebuilds combos of ``results`` in full, with buy and hold
    beside them (``barsweep trades``, ``plot best``, ``report``): before it, when numba's
    cache lacks a kernel the rebuild runs (:func:`~barsweep.engine.warm.
    rebuild_kernels`), one line naming them on this module's logger (stderr on the
    command line); after it, those the command ran marked compiled, so the line is said
    once.

    A store whose spec cannot be read is left to the command, which says why."""
    from ...engine.cache import is_marked, mark_compiled
    from ...engine.warm import compiled_here, rebuild_kernels
    from ..run.results import open_results
    from .kinds import kind_of

    try:
        ds = open_results(results) if isinstance(results, str | os.PathLike) else results
        spec, _ = stored_spec(ds, what)
        portfolio = kind_of(ds).portfolio
        kernels = rebuild_kernels(spec.strategy_def, portfolio)
    except BarsweepError:
        kernels = ()
    cold = [k for k in kernels if not is_marked(k[1], k[2])]
    if cold:
        kind = "recording portfolio kernel" if portfolio else "recording kernel"
        logger.info("barsweep: compiling the %s%s of %s (first use on this machine, cached "
                    "after) ...", kind, "s" * (len(cold) > 1),
                    " and ".join(name for name, _, _ in cold))
    yield
    for _, function, variant in cold:
        if compiled_here(function, variant):  # run by the command, not only named
            mark_compiled(function, variant)


def stored_bars(spec, symbol: str):
    """The bars ``symbol``'s runs covered: ``open_bars`` of the spec's store and range."""
    from ...datasets import open_bars

    return open_bars(spec.data.store, symbol, spec.data.timeframe, spec.data.start,
                     spec.data.end)


def best_backtest(results, rank: int = 1, by: str = "sharpe", where: str | None = None,
                  symbol: str | None = None, *, window: int | None = None,
                  sample: str | None = None):
    """Combo number ``rank`` of the ranking by ``by`` (as ``barsweep rank``, of
    ``symbol``'s combos when given), rebuilt with :func:`barsweep.engine.backtest.single`:
    equity, trades and close in full (of a portfolio store, a
    :class:`~barsweep.engine.backtest.portfolio.PortfolioResult`: the account's equity,
    each member's shares, the trades). In a walk-forward store, ``window`` names the
    window (required there) and ``sample`` its train (default) or test sample: the
    ranking is of that sample's cells, the combo run over its bars.

    Raises :class:`~barsweep.errors.MismatchError` (exit 1) when the rebuilt metrics
    differ from the store's (the bars or the code changed since the run), naming the
    metric.
    """
    from ..run.results import open_results
    from .rank import combo_params
    from .rank import rank as ranked

    ds = open_results(results) if isinstance(results, str | os.PathLike) else results
    view, window, sample = window_view(ds, window, sample)
    if rank < 1:
        raise ResultsError(f"--rank: expected 1 or more, got {rank}")
    top = ranked(view, by=by, top=rank, where=where, symbol=symbol)
    if len(top) < rank:
        raise ResultsError(f"--rank {rank}: only {len(top)} combos are ranked by {by}")
    row = top.iloc[rank - 1]
    params = {name: _plain(row[name]) for name in combo_params(view)}
    return rebuild_combo(ds, row["symbol"], params, "plot best", window=window,
                         sample=sample)


def window_view(ds, window: int | None, sample: str | None):
    """``ds`` at a walk-forward store's ``window`` and ``sample`` (checked; sample train
    by default), or ``ds`` itself for any other store (where both must be None)."""
    if "window" not in ds.dims:
        if window is not None or sample is not None:
            raise SpecError("--window and --sample choose a walk-forward store's window; "
                            "this store has none")
        return ds, None, None
    n = ds.sizes["window"]
    if window is None:
        raise SpecError(f"--window: a walk-forward store: name one of its {n} windows "
                        f"(0 to {n - 1}) and --sample train (default) or test; `barsweep "
                        f"walkforward` shows the combo each window chose and the stitched "
                        f"out-of-sample run")
    if window not in ds["window"].values:
        raise SpecError(f"--window: {window} is not a window of the store; its windows "
                        f"are 0 to {n - 1}")
    sample = sample or "train"
    if sample not in ("train", "test"):
        raise SpecError(f"--sample: expected train or test, got {sample!r}")
    return ds.sel(window=window, sample=sample), window, sample


def rebuild_combo(ds, symbol: str, params: dict, what: str = "the results store", *,
                  window: int | None = None, sample: str | None = None):
    """The combo ``params`` (every parameter's value) of ``symbol`` in results Dataset
    ``ds``, rebuilt with :func:`barsweep.engine.backtest.single` from the stored spec over the
    bars its cell ran (:meth:`~.kinds.StoreKind.cell`: every bar, a walk-forward ``window``'s
    ``sample``, a search rung's most recent bars); in a portfolio store (``symbol``
    portfolio), with
    :func:`~barsweep.pipeline.analysis.rebuild_portfolio.rebuild_portfolio`.

    Raises :class:`~barsweep.errors.MismatchError` (exit 1) when the rebuilt metrics
    differ from the store's, naming the metric.
    """
    from .kinds import kind_of

    spec, ppy = stored_spec(ds, what)
    kind = kind_of(ds)
    if kind.portfolio:
        from ..config.portfolio import members
        from .rebuild_portfolio import rebuild_portfolio

        bars = {member: stored_bars(spec, member) for member in members(spec)}
        n = len(next(iter(bars.values()))["close"])
        cell, span = kind.cell(ds, symbol, params, what, window, sample, n)
        return rebuild_portfolio(cell, spec, ppy, bars, params, span)
    bars = stored_bars(spec, symbol)
    cell, span = kind.cell(ds, symbol, params, what, window, sample, len(bars["close"]))
    stored_metrics = cell[list(METRICS)].load()
    # the execution axes (stops, sizes, leverage, orders) are the combo's, as swept
    result = backtest(bars, spec.strategy_def, params, ppy=ppy, span=span,
                      **spec.execution.model_dump())
    at = {} if window is None else {"window": window, "sample": sample}
    for name in METRICS:
        stored, rebuilt = float(stored_metrics[name]), result.metrics[name]
        if not (stored == rebuilt or (math.isnan(stored) and math.isnan(rebuilt))):
            raise MismatchError(f"the rebuilt combo {params} of {symbol}"
                                f"{''.join(f', {k} {v}' for k, v in at.items())} has {name} "
                                f"{rebuilt!r}, the store {stored!r}: the bars or barsweep "
                                f"changed since the run")
    return result


def _plain(value):
    return value.item() if hasattr(value, "item") else value
