"""A run checked on the driver before any cluster starts: where it writes, the bars it
reads, its grid, that its strategy compiles, and, for ``--resume``, whether the store
may be continued.

Nothing here writes results or starts anything (compiling the strategy fills numba's
cache only); every refusal is a :class:`~barsweep.errors.BarsweepError` naming the path,
key, file or function.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import yaml

from ...datasets import fingerprint, open_bars, periods_per_year, timeframe_seconds
from ...datasets.timeframes import time_text
from ...engine import METRICS
from ...engine.core import bars_per_year, warm_up
from ...engine.rules import columns_read, lookback
from ...engine.warm import check, check_portfolio, is_compiled, portfolio_compiled
from ...errors import ResultsError, SpecError
from ...version import __version__
from ..config.dims import NON_PARAM_DIMS
from ..config.grid import Grid
from ..config.model import DataSpec, Spec
from ..config.search import short_rung_problem
from .kinds import RunKind, accounts_of, run_kind
from .results import check_out, store_attrs


@dataclass(frozen=True)
class Prepared:
    """A run checked on the driver before any cluster starts: where it writes, the
    bars it reads (their fingerprint) and its grid; ``resume`` holds the store's
    block shape and ``done`` flags when it continues an earlier run. ``compile_seconds``:
    what compiling the strategy took on the driver, None when numba's cache held it."""

    spec: Spec
    out: str
    grid: Grid
    n_bars: int
    bars_fingerprint: dict
    symbol_bars: tuple[int, ...] = ()
    kind: RunKind | None = None
    spec_path: str | None = None
    resume_chunks: tuple[int, ...] | None = None
    overwrite: bool = False
    annualised: str = ""
    compile_seconds: float | None = None

    @functools.cached_property
    def valid_combos(self) -> int:
        """The grid's valid combos, or an upper bound of them (``Grid.estimate_valid``,
        within its counting budget), counted once for the run."""
        return self.grid.estimate_valid()[0]

    @property
    def windows(self) -> np.ndarray | None:
        """Walk-forward's ``(W, 4)`` train and test bounds; None without."""
        return self.kind.spans.windows

    @property
    def account_bars(self) -> tuple[int, ...]:
        """The bars of each account the run ranks on its own: each symbol's, or a
        portfolio's one account's (its members' common bars)."""
        return self.kind.accounts.account_bars(self.symbol_bars)

    def combo_bars(self) -> float:
        """The work of the run: combos (estimated) x the bars each one runs, summed over
        the symbols and, with walk-forward, over every window's train and test runs."""
        return float(self.valid_combos) * self.kind.spans.bars_run(self.symbol_bars)

    def size_line(self, segments: int, n_threads: int) -> str:
        """The run's combos, its store's size on disk (with ``segments`` PBO segments)
        and its time on ``n_threads`` worker threads (:mod:`.estimate`); a search's, the
        combos it draws and evaluates."""
        return self.kind.combos.size_line(self.kind, self, segments, n_threads)


def prepare_run(spec: Spec, *, out: str | None = None, overwrite: bool = False,
                resume: bool = False, spec_path: str | None = None,
                say: Callable[[str], None] | None = None) -> Prepared:
    """Check everything a run needs that the driver can check alone, writing nothing:
    the output (:func:`~barsweep.pipeline.run.results.check_out`), every symbol's bars,
    the grid, that the strategy compiles (:func:`check_strategy`) and, with ``resume``,
    that the store was made by this same spec, version and bars. Raises a
    :class:`~barsweep.errors.BarsweepError` naming the problem. ``say`` hears lines
    for people: the bars a year the metrics are annualised with, and when the strategy
    compiles (seconds)."""
    if overwrite and resume:
        raise ResultsError("--overwrite and --resume exclude each other: choose one")
    out = check_out(out or spec.run.out, overwrite=overwrite, resume=resume)
    spec = spec.model_copy(update={"run": spec.run.model_copy(update={"out": out}),
                                   "data": accounts_of(spec).data(spec.data)})
    if spec.data.align == "inner" and len(spec.data.symbols) > 1:
        spec = spec.model_copy(update={"data": common_range(spec.data)})
    symbol_bars, times = [], []
    for symbol in spec.data.symbols:  # refuse a missing symbol or empty range up front
        ds = open_bars(spec.data.store, symbol, spec.data.timeframe, spec.data.start,
                       spec.data.end)
        check_volume(spec, symbol, ds)
        symbol_bars.append(ds.sizes["time"])
        times.append(ds["time"].values.astype("datetime64[ns]"))
    spec, annualised = measured_year(spec, times)
    if say is not None:
        say(annualised)
    kind = run_kind(spec, times)
    # a search's rungs run on each symbol's bars, or on each window's train bars
    check_rungs(spec, kind.spans.shortest(tuple(symbol_bars)))
    bars_fingerprint = fingerprint(spec.data.store, spec.data.symbols, spec.data.timeframe)
    grid = spec.param_grid
    kind.combos.check(grid)  # a draw's refusals, before anything compiles
    chunks = resumable_chunks(out, spec, bars_fingerprint) if resume else None
    seconds = check_strategy(spec, say)
    return Prepared(spec, out, grid, max(symbol_bars), bars_fingerprint, tuple(symbol_bars),
                    kind,
                    spec_path=os.path.abspath(spec_path) if spec_path else None,
                    resume_chunks=chunks, overwrite=overwrite, annualised=annualised,
                    compile_seconds=seconds)


def check_volume(spec: Spec, symbol: str, ds) -> None:
    """Refuse a rule that reads ``volume`` on bars ``ds`` of ``symbol`` that have none
    (imported without a volume column: NaN at every bar), in one line naming the
    symbol: SpecError."""
    if "volume" not in columns_read(spec.strategy_def):
        return
    if "volume" in ds and not np.isnan(ds["volume"].values).all():
        return
    raise SpecError(f"strategy.rule reads volume, but {symbol}'s {spec.data.timeframe} bars "
                    f"in {spec.data.store} have no volume (imported without a volume "
                    f"column: NaN at every bar); import them with a volume column, or "
                    f"write the rule without volume")


def check_rungs(spec: Spec, n_bars: int) -> None:
    """Refuse a halving search whose rung 0 runs fewer bars (of the shortest symbol's
    ``n_bars``) than the strategy's indicators take to warm up at the grid's largest
    values, and its rules' lags past them (:func:`~barsweep.engine.rules.lookback`;
    :func:`~barsweep.pipeline.config.search.short_rung_problem`): a SpecError
    naming ``search.rungs``."""
    if spec.search.n_rungs < 2:
        return
    strategy = spec.strategy_def
    largest = {name: values.max() for name, values in spec.param_grid.axes
               if name in strategy.param_names}
    warm = warm_up(strategy, largest, n_bars) + lookback(strategy, largest)
    problem = short_rung_problem(spec.search, n_bars, warm)
    if problem:
        raise SpecError(f"search.rungs: {problem}")


#: Symbols whose bars a year differ by more than this share cannot share one year.
YEAR_AGREEMENT = 0.05


def measured_year(spec: Spec, times: list[np.ndarray]) -> tuple[Spec, str]:
    """``spec`` with ``data.year_days`` set, and the sentence a run prints about it.

    A spec that sets ``year_days`` keeps it. Otherwise each symbol's bars are measured
    (:func:`~barsweep.engine.core.year.bars_per_year`); the median over the symbols becomes
    ``year_days = bars a year x timeframe / 1 day`` (so ``periods_per_year`` gives those
    bars back, and walk-forward's ``"6M"`` is half of them). Symbols that disagree by
    more than 5 % (a 24/7 market beside a weekday one) are refused: one year cannot
    annualise both, and the user must choose it.
    """
    seconds = timeframe_seconds(spec.data.timeframe)
    if spec.data.year_days is not None:
        ppy = periods_per_year(spec.data.timeframe, spec.data.year_days)
        return spec, (f"annualised with {ppy:,.6g} bars a year (data.year_days: "
                      f"{spec.data.year_days:g})")
    measured = [bars_per_year(t, seconds * 1e9) for t in times]
    ppys = np.array([ppy for ppy, _ in measured])
    low, high = int(np.argmin(ppys)), int(np.argmax(ppys))
    if ppys[high] > ppys[low] * (1 + YEAR_AGREEMENT):
        symbols = spec.data.symbols
        raise SpecError(f"data.year_days: the symbols' bars disagree on the bars in a year "
                        f"({symbols[high]}: {ppys[high]:,.6g}, {measured[high][1]}; "
                        f"{symbols[low]}: {ppys[low]:,.6g}, {measured[low][1]}); set "
                        f"data.year_days (e.g. 365 or 252) or sweep them in separate runs")
    ppy = float(np.median(ppys))
    year_days = ppy * seconds / 86_400
    how = measured[0][1] if len(measured) == 1 else f"the median of {len(measured)} symbols"
    spec = spec.model_copy(update={"data": spec.data.model_copy(
        update={"year_days": year_days})})
    return spec, (f"annualised with {ppy:,.6g} bars a year, from the bars ({how}); "
                  f"set data.year_days to override")



def check_strategy(spec: Spec, say: Callable[[str], None] | None = None) -> float | None:
    """Make sure the spec's strategy compiles, on the driver (:func:`barsweep.engine.warm.
    check`): nothing when numba's cache holds the kernel the run's blocks run, else its
    signal typed and, unless the run goes to GPUs (``backend: cuda``, or ``auto`` on
    ``cluster: cuda``: their workers build their own kernel), that kernel compiled into
    the cache, where this machine's workers load it: the sweep kernel, or for a portfolio
    its portfolio kernel alone (:func:`~barsweep.engine.warm.check_portfolio`: one for any
    number of members; a portfolio's blocks never run the single-symbol kernel).
    Returns the seconds spent compiling (None: cached); SpecError naming the module, the
    function and what is wrong. ``say`` hears which kernel compiles before it does, and
    how long it took."""
    strategy = spec.strategy_def
    on_gpus = spec.run.backend == "cuda" or (
        spec.run.backend == "auto" and spec.cluster.kind == "cuda")
    portfolio = accounts_of(spec).compiles_portfolio(on_gpus)
    if portfolio_compiled(strategy) if portfolio else is_compiled(strategy):
        return None
    if say is not None:
        say(compiling_line(spec.strategy_name, portfolio))
    with stops_held():  # numba and LLVM interrupted mid-compile leave a mess
        seconds = check(strategy, kernel=not (on_gpus or portfolio))
        if portfolio:
            seconds = (seconds or 0.0) + (check_portfolio(strategy) or 0.0)
    if say is not None and seconds is not None:
        say(f"compiled in {seconds:.1f} s")
    return seconds


def compiling_line(name: str, portfolio: bool) -> str:
    """What a run says before it compiles strategy ``name``'s sweep kernel, or with
    ``portfolio`` its portfolio kernel (which ``barsweep warm`` does not compile)."""
    if portfolio:
        return (f"compiling the {name} portfolio kernel: once on this machine, for any "
                f"number of members (numba caches it)")
    return (f"compiling the {name} kernel: once on this machine (numba caches it; "
            f"`barsweep warm` does it ahead of time)")


def common_range(data: DataSpec) -> DataSpec:
    """``data`` with ``start`` and ``end`` narrowed to the range every symbol covers
    (whole seconds, end exclusive: one second after the earliest last bar), so every
    later step, and the spec stored with the results, reads the same bars."""
    firsts, lasts = [], []
    for symbol in data.symbols:
        time = open_bars(data.store, symbol, data.timeframe, data.start, data.end)["time"]
        time = time.values[[0, -1]].astype("datetime64[ns]")
        firsts.append((time[0], symbol))
        lasts.append((time[1], symbol))
    (start, late), (last, early) = max(firsts), min(lasts)
    if start > last:
        raise SpecError(f"data.align: inner: the symbols share no bars: {late}'s start "
                        f"{time_text(start)} is after {early}'s last bar {time_text(last)}")
    end = last.astype("datetime64[s]") + np.timedelta64(1, "s")
    return data.model_copy(update={"start": np.datetime_as_string(start, unit="s"),
                                   "end": np.datetime_as_string(end, unit="s")})


#: The spec's sections that decide a store's contents: a resume must not change them.
RESULT_SECTIONS = ("data", "modules", "strategy", "grid", "constraints", "execution",
                   "analysis", "walk_forward", "search", "portfolio")


def resumable_chunks(out: str, spec: Spec, bars_fingerprint: dict) -> tuple[int, ...]:
    """The block shape of the store at ``out`` if ``spec`` may continue it, else
    ResultsError naming every difference (spec keys, package version, bars)."""
    attrs = store_attrs(out) or {}
    problems = []
    try:
        stored = yaml.safe_load(attrs.get("spec", "")) or {}
    except yaml.YAMLError:
        stored = {}
    now = spec.model_dump(mode="json")
    for section in RESULT_SECTIONS:
        for key, (was, new) in sorted(_differences(stored.get(section), now.get(section),
                                                   section).items()):
            problems.append(f"{key} was {was!r}, now {new!r}")
    if attrs.get("barsweep_version") != __version__:
        problems.append(f"barsweep version was {attrs.get('barsweep_version')!r}, "
                        f"now {__version__!r}")
    try:
        was_hash = json.loads(attrs.get("bars_fingerprint", "{}")).get("blake2b")
    except ValueError:
        was_hash = None
    if was_hash != bars_fingerprint["blake2b"]:
        problems.append(f"the bars' fingerprint was {str(was_hash)[:12]}..., now "
                        f"{bars_fingerprint['blake2b'][:12]}... (the bar files changed)")
    if problems:
        raise ResultsError(f"--resume: {out} was made by another run: "
                           f"{'; '.join(problems)}; use --overwrite to start again")
    import zarr

    from .integrity import reading

    with reading(out):  # an array's metadata damaged: one line naming it
        metric = zarr.open_group(out, mode="r")[METRICS[0]]
    names = metric.metadata.dimension_names or ()
    return tuple(c for c, d in zip(metric.chunks, names, strict=True)
                 if d not in NON_PARAM_DIMS)


def _differences(was, now, key: str) -> dict[str, tuple]:
    """Dotted keys whose values differ between two JSON-like trees."""
    if isinstance(was, dict) and isinstance(now, dict):
        diff = {}
        for k in sorted(set(was) | set(now), key=str):
            diff.update(_differences(was.get(k), now.get(k), f"{key}.{k}"))
        return diff
    return {} if was == now else {key: (was, now)}


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM while the body runs, then deliver the first one
    that came to the handlers that were there before.

    A compile interrupted inside numba or LLVM leaves their state half torn down (an
    llvmlite ``__del__`` traceback, an exit by the signal itself rather than the run's
    one line): held, the stop takes effect the moment the compile ends (seconds, once
    per machine). Outside the main thread (which alone runs signal handlers) nothing
    is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    stops = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.signal(s, lambda signum, frame: came.append(signum)) for s in stops}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        if came:
            signal.raise_signal(came[0])
