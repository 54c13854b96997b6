"""A run's kind, chosen in one place (:func:`run_kind`): who trades, over which bars,
and which combos.

A kind is three parts, each one of two small classes that answer the same questions,
so that no other module of a run asks which mode it is in:

- its accounts (:func:`accounts_of`): :class:`Symbols`, each symbol trading on its own,
  or :class:`Portfolio`, one account trading every member (the store's one ``symbol``
  is ``portfolio``, its members' own variables over ``member``);
- its spans: :class:`Whole`, every bar (with PBO's segment sums), or
  :class:`WalkForward`, each window's train and test bars (the store's ``window`` and
  ``sample`` dims, and each window's bounds as coordinates);
- its combos: :class:`GridCombos`, every valid combo in boxes (:mod:`.plan`), or
  :class:`Drawn`, a search's draw run in rungs (:mod:`.search`).

Compositions are the parts together: a walk-forward portfolio search is
``RunKind(Portfolio(...), WalkForward(...), Drawn(...))``. The read side's twin is
:func:`barsweep.pipeline.analysis.kinds.kind_of`, which reads a store's kind back from
its attributes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ...datasets.timeframes import time_text
from ...engine.core import segment_bounds
from ...engine.portfolio import sizing_rows
from ...errors import SpecError
from ..config.model import DataSpec, Spec
from ..config.portfolio import PORTFOLIO_LABEL, PortfolioSpec, members
from ..config.search import SearchSpec, check_drawable, rung_sizes
from .accounts import BarsRef, PortfolioAccount, SymbolAccount
from .estimate import search_size_line, size_line
from .portfolio_block import portfolio_backend

# ----------------------------------------------------------------------- accounts


@dataclass(frozen=True)
class Symbols:
    """Each symbol trades on its own account: a block per symbol, the store's
    ``symbol`` dim the spec's symbols."""

    #: how a run describes its combos and its search's lanes
    per = "per symbol"
    lane = "each symbol"

    def data(self, data: DataSpec) -> DataSpec:
        """The bars the run reads: the spec's."""
        return data

    def account_bars(self, symbol_bars: tuple[int, ...]) -> tuple[int, ...]:
        """The bars of each account the run ranks on its own: each symbol's."""
        return symbol_bars

    def store_symbols(self, symbols: list[str], attrs: dict) -> tuple[list[str], list[str], dict]:
        """The store's ``symbol`` dim, its ``member`` dim (none) and its attributes."""
        return list(symbols), [], attrs

    def accounts(self, refs: list[BarsRef]) -> list[SymbolAccount]:
        """The blocks' accounts: one per symbol."""
        return [SymbolAccount(ref) for ref in refs]

    def table_bars(self, n_bars: int) -> int:
        """The bars of the indicator tables one block holds: one symbol's."""
        return n_bars

    def sizing_rows(self, dims: dict[str, int]) -> int:
        """Rows a block holds beyond its indicators' for sizing: none."""
        return 0

    def backend(self, backend: tuple[str, str], n_symbols: int) -> tuple[str, str]:
        """The blocks' backend, as chosen (``(name, reason)``)."""
        return backend

    def compiles_portfolio(self, on_gpus: bool) -> bool:
        """Whether the driver compiles the portfolio kernel: never."""
        return False


@dataclass(frozen=True)
class Portfolio:
    """One account trades every member (``section``, the spec's ``portfolio``): a block
    reads every member's bars, the store's one ``symbol`` is :data:`PORTFOLIO_LABEL`
    and its members' variables run over ``member`` (docs/PORTFOLIOS.md)."""

    section: PortfolioSpec
    members: tuple[str, ...]
    per = "of the portfolio (one account)"
    lane = "the portfolio"

    def data(self, data: DataSpec) -> DataSpec:
        """The bars the run reads: its members', aligned on their common bars."""
        return data.model_copy(update={"symbols": list(self.members), "align": "inner"})

    def account_bars(self, symbol_bars: tuple[int, ...]) -> tuple[int, ...]:
        """The one account's bars: its members' common bars."""
        return symbol_bars[:1]

    def store_symbols(self, symbols: list[str], attrs: dict) -> tuple[list[str], list[str], dict]:
        """The one account, its members, and the section and members in the attributes
        (docs/SPEC.md, "Portfolios")."""
        return [PORTFOLIO_LABEL], list(symbols), {
            **attrs, "portfolio": json.dumps(self.section.model_dump(mode="json")),
            "members": list(symbols)}

    def accounts(self, refs: list[BarsRef]) -> list[PortfolioAccount]:
        return [PortfolioAccount(tuple(refs), self.section)]

    def table_bars(self, n_bars: int) -> int:
        """A table per member."""
        return n_bars * len(self.members)

    def sizing_rows(self, dims: dict[str, int]) -> int:
        """The weights' and priority's rows (:func:`~barsweep.engine.portfolio.sizing_rows`)."""
        return sizing_rows(self.section.weight, self.section.priority,
                           dims.get("vol_lookback", 1))

    def backend(self, backend: tuple[str, str], n_symbols: int) -> tuple[str, str]:
        """The CPU where CUDA was chosen but cannot take the members
        (:func:`~.portfolio_block.portfolio_backend`)."""
        return portfolio_backend(n_symbols, backend)

    def compiles_portfolio(self, on_gpus: bool) -> bool:
        """The portfolio kernel, unless GPU workers build their own."""
        return not on_gpus


def accounts_of(spec: Spec) -> Symbols | Portfolio:
    """Who trades in ``spec``'s run."""
    if spec.portfolio is None:
        return Symbols()
    return Portfolio(spec.portfolio, tuple(members(spec)))


# ----------------------------------------------------------------------- spans

#: A walk-forward block runs at most this many combos x runs (two per window): its
#: metrics then take at most MAX_BLOCK_RUNS x len(METRICS) x 8 B, as a plain block's of
#: :data:`~.plan.MAX_BLOCK_COMBOS` combos.
MAX_BLOCK_RUNS = 1 << 20


def windows_per_block(n_windows: int, box_combos: int) -> int:
    """Walk-forward windows per block: all of them where the block's combos x train and
    test runs stay within :data:`MAX_BLOCK_RUNS` (one block then hoists the indicators
    once and writes once for every window), fewer for large boxes.

    >>> windows_per_block(15, 36), windows_per_block(15, 100_000)
    (15, 5)
    """
    return max(1, min(n_windows, MAX_BLOCK_RUNS // max(1, 2 * box_combos)))


@dataclass(frozen=True)
class Whole:
    """Every combo runs once over every bar of its account."""

    windows = None

    def segments(self, pbo_segments: int) -> int:
        """The PBO segments a block sums its returns over: the spec's."""
        return pbo_segments

    def coords(self, account_bars: tuple[int, ...], segments: int) -> dict:
        """With ``segments``, ``seg_n`` over ``(symbol, segment)``: the bars of each
        segment, as the kernels cut them."""
        if not segments:
            return {}
        seg_n = [np.diff(segment_bounds(0, n, segments), axis=1)[:, 0] for n in account_bars]
        return {"seg_n": (("symbol", "segment"), np.asarray(seg_n, dtype=np.int64))}

    def runs(self, box_combos: int) -> int:
        """The runs of each combo of a block of ``box_combos``: one."""
        return 1

    def step(self, box_combos: int) -> int:
        """Walk-forward windows a block runs: none."""
        return 0

    def groups(self, step: int) -> list[tuple]:
        """One group of no window: ``(window slice, spans)``."""
        return [(slice(0, 0), None)]

    def lead(self, step: int) -> tuple[tuple[str, np.ndarray, int], ...]:
        """The store's dims between ``symbol`` and the combos': none."""
        return ()

    def bars_run(self, symbol_bars: tuple[int, ...]) -> int:
        """The bars one combo runs over every symbol: all of them."""
        return sum(symbol_bars)

    def shortest(self, symbol_bars: tuple[int, ...]) -> int:
        """The fewest bars a search's first rung can have: the shortest symbol's."""
        return min(symbol_bars)

    def n_runs(self) -> int:
        """Runs of each combo in the store: one."""
        return 1


@dataclass(frozen=True, eq=False)
class WalkForward:
    """Each combo runs on every window's train and test bars: ``windows`` ``(W, 4)``
    train and test bounds, ``times`` their coordinates (bar indices and times of each
    part's first and last bar)."""

    windows: np.ndarray
    times: dict = field(default_factory=dict)

    def segments(self, pbo_segments: int) -> int:
        """None: walk-forward's test samples are its out-of-sample evidence."""
        return 0

    def coords(self, account_bars: tuple[int, ...], segments: int) -> dict:
        return dict(self.times)

    def runs(self, box_combos: int) -> int:
        """Two per window of a block (train, test)."""
        return 2 * self.step(box_combos)

    def step(self, box_combos: int) -> int:
        """Windows a block of ``box_combos`` runs (:func:`windows_per_block`)."""
        return windows_per_block(len(self.windows), box_combos)

    def groups(self, step: int) -> list[tuple]:
        """The windows a block runs, ``step`` at a time: each group's ``(window slice,
        its train and test spans)``."""
        n = len(self.windows)
        return [(slice(w, min(w + step, n)), tuple(
            span for a, b, c, d in self.windows[w:w + step].tolist()
            for span in ((a, b), (c, d)))) for w in range(0, n, step)]

    def lead(self, step: int) -> tuple[tuple[str, np.ndarray, int], ...]:
        """``window`` (``step`` a block) and ``sample`` (train, test)."""
        from ..config.dims import SAMPLES

        return (("window", np.arange(len(self.windows)), step),
                ("sample", np.array(SAMPLES, dtype=object), len(SAMPLES)))

    def bars_run(self, symbol_bars: tuple[int, ...]) -> int:
        """Every window's train and test bars, on every symbol."""
        spans = self.windows[:, 1::2] - self.windows[:, 0::2]
        return len(symbol_bars) * int(spans.sum())

    def shortest(self, symbol_bars: tuple[int, ...]) -> int:
        """The shortest train window: a search's rungs run there."""
        return int((self.windows[:, 1] - self.windows[:, 0]).min())

    def n_runs(self) -> int:
        return 2 * len(self.windows)


# ----------------------------------------------------------------------- combos


@dataclass(frozen=True)
class GridCombos:
    """Every valid combo of the grid, in boxes (:func:`~.plan.plan`)."""

    drawn = ""

    def check(self, grid) -> None:
        """Nothing to refuse before a compile."""

    def search_line(self, lane: str) -> str | None:
        """What ``barsweep check`` says of a search: nothing."""
        return None

    def size_line(self, kind: RunKind, prepared, segments: int, n_threads: int) -> str:
        """The run's combos, its store's size and its time on ``n_threads``
        (:func:`~.estimate.size_line`); constraints' excluded cells compress to nothing."""
        n_combos = prepared.valid_combos * len(kind.accounts.account_bars(prepared.symbol_bars))
        return size_line(n_combos, n_combos * kind.spans.n_runs(), segments,
                         prepared.combo_bars(), n_threads)


@dataclass(frozen=True)
class Drawn:
    """A search's combos (``search``: the spec's section), drawn from the grid and run
    in rungs (:mod:`.search`)."""

    search: SearchSpec
    drawn = ": the space the search draws from"

    def check(self, grid) -> None:
        """The draw's refusals (:func:`~barsweep.pipeline.config.search.check_drawable`)."""
        check_drawable(grid, self.search.first_rung())

    def search_line(self, lane: str) -> str:
        """``search: halving, seed 0: 64 combos drawn, searched in each symbol in 3
        rungs of 64, 21, 7``."""
        search = self.search
        sizes = rung_sizes(search.first_rung(), search.eta, search.n_rungs)
        rungs = (f" in {len(sizes)} rungs of {', '.join(f'{n:,}' for n in sizes)}"
                 if len(sizes) > 1 else "")
        return (f"search: {search.method}, seed {search.seed}: {sizes[0]:,} combos drawn, "
                f"searched in {lane}{rungs}")

    def size_line(self, kind: RunKind, prepared, segments: int, n_threads: int) -> str:
        """What the search draws and evaluates (:func:`~.search.search_size_line`)."""
        return search_size_line(prepared.spec, kind.accounts.account_bars(prepared.symbol_bars),
                                n_threads, kind.spans.windows)


# ----------------------------------------------------------------------- the kind


@dataclass(frozen=True, eq=False)
class RunKind:
    """A run's kind: its :attr:`accounts`, :attr:`spans` and :attr:`combos`."""

    accounts: Symbols | Portfolio
    spans: Whole | WalkForward
    combos: GridCombos | Drawn

    def store_coords(self, symbol_bars: tuple[int, ...], segments: int) -> dict:
        """Coordinates of the store beyond its dims: ``n_bars`` over ``symbol`` (the bars
        each account's runs cover), ``seg_n`` with ``segments`` PBO segments, and a
        walk-forward store's window bounds."""
        account_bars = self.accounts.account_bars(symbol_bars)
        return {"n_bars": (("symbol",), np.asarray(account_bars, dtype=np.int64)),
                **self.spans.coords(account_bars, segments)}

    @property
    def lane(self) -> str:
        """Where a search runs, for people: each symbol, the portfolio, or each window of
        either."""
        lane = self.accounts.lane
        if self.spans.windows is not None:
            lane = f"each of the {len(self.spans.windows):,} walk-forward windows of {lane}"
        return lane


def walk_forward_windows(spec: Spec, times: list[np.ndarray]) -> tuple[np.ndarray, dict]:
    """The walk-forward windows of ``spec`` over its bars (``walk_forward.bounds``, one
    set for every symbol, which must then cover the same bars) and their coordinates:
    the bar indices and the times of the first and last bar of each part."""
    wf = spec.walk_forward
    first = times[0]
    for symbol, other in zip(spec.data.symbols[1:], times[1:], strict=True):
        if len(other) != len(first) or (other[[0, -1]] != first[[0, -1]]).any():
            raise SpecError(
                f"walk_forward needs every symbol over the same bars: {spec.data.symbols[0]} "
                f"has {len(first):,} bars from {time_text(first[0])} to "
                f"{time_text(first[-1])}, {symbol} {len(other):,} from {time_text(other[0])} "
                f"to {time_text(other[-1])}; set data.align: inner "
                f"(or data.start/end), or sweep them in separate runs")
    windows = wf.bounds(len(first), spec.data.timeframe, spec.data.year_days)
    coords = {}
    for k, part in enumerate(("train_start", "train_end", "test_start", "test_end")):
        bars = windows[:, k]
        coords[f"{part}_bar"] = (("window",), bars)
        coords[part] = (("window",), first[bars - 1 if part.endswith("_end") else bars])
    return windows, coords


def spans_of(windows: np.ndarray | None, times: dict | None = None) -> Whole | WalkForward:
    """Every bar, or walk-forward's ``windows`` (``(W, 4)``; ``times``, their
    coordinates)."""
    return Whole() if windows is None else WalkForward(windows, times or {})


def run_kind(spec: Spec, times: list[np.ndarray] | None = None) -> RunKind:
    """The kind of ``spec``'s run, whose bars have the times ``times`` (one array per
    symbol; walk-forward's windows are measured on them): the one place a run's mode is
    chosen."""
    spans = (Whole() if spec.walk_forward is None else
             WalkForward(*walk_forward_windows(spec, times)))
    combos = GridCombos() if spec.search.method == "grid" else Drawn(spec.search)
    return RunKind(accounts_of(spec), spans, combos)

