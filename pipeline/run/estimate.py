"""What a run will cost, said before it starts: its store's size on disk and its time.

The time is the run's combo-bars over :data:`RATE_PER_WORKER` per worker thread, a
constant measured in ``benchmarks/NOTES.md`` (not measured again on each run).
"""

from __future__ import annotations

import numpy as np

from ...engine import METRICS
from ..config.model import Spec
from ..config.search import search_work
from .results import SEGMENT_SUMS

#: Combo-bars per second one worker thread sustains in a run: the general CPU path of
#: ``ema_cross`` measured at ~175-206 M per core, two worker processes side by side at
#: ~207 M each (benchmarks/NOTES.md, 2.45 GHz cores).
RATE_PER_WORKER = 200e6


def store_bytes(n_cells: int, segments: int) -> int:
    """Bytes of a results store on disk: 8 B per metric per cell, and per PBO segment
    the segment sums per cell (``n_cells``: the valid combos x symbols x walk-forward
    runs; excluded cells, all NaN, compress to almost nothing). An upper bound where
    many combos share their results (few trades), which Zstd then compresses."""
    return 8 * n_cells * (len(METRICS) + len(SEGMENT_SUMS) * segments)


def run_seconds(combo_bars: float, n_workers: int) -> float:
    """Seconds a run of ``combo_bars`` takes on ``n_workers`` worker threads at
    :data:`RATE_PER_WORKER`."""
    return combo_bars / (RATE_PER_WORKER * max(1, n_workers))


def human_bytes(n: float) -> str:
    """``n`` bytes in kB, MB, GB or TB (powers of 1000), two significant figures.

    >>> human_bytes(1.03e11), human_bytes(512)
    ('100 GB', '512 B')
    """
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{two_figures(n / scale)} {unit}"
    return f"{n:.0f} B"


def human_seconds(s: float) -> str:
    """``s`` seconds in s, min, h or days, two significant figures.

    >>> human_seconds(14400), human_seconds(0.2), human_seconds(90)
    ('4 h', '0.2 s', '1.5 min')
    """
    for unit, scale in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= scale:
            return f"{two_figures(s / scale)} {unit}"
    return f"{two_figures(s)} s"


def two_figures(x: float) -> str:
    """``x`` rounded to two significant figures, without an exponent: '120', '1.5'."""
    rounded = float(f"{x:.2g}")
    return f"{rounded:,.0f}" if rounded >= 10 else f"{rounded:g}"


def size_line(n_combos: int, n_cells: int, segments: int, combo_bars: float,
              n_workers: int) -> str:
    """The line a run says before it starts, e.g. ``312,687,500 combos: ~100 GB store,
    ~4 h on 2 workers (at 200 M combo-bars/s each)``."""
    size = human_bytes(store_bytes(n_cells, segments))
    time = human_seconds(run_seconds(combo_bars, n_workers))
    return (f"{n_combos:,} combos: ~{size} store, ~{time} on {n_workers} worker"
            f"{'s' if n_workers != 1 else ''} (at {RATE_PER_WORKER / 1e6:.0f} M "
            f"combo-bars/s each)")


def search_size_line(spec: Spec, symbol_bars: tuple[int, ...], n_threads: int,
                     windows: np.ndarray | None = None) -> str:
    """What a search evaluates, its store's size and its time on ``n_threads`` worker
    threads (:func:`~.estimate.size_line`), from the spec alone: the combos it draws per
    symbol, every rung's cells and combo-bars (:func:`~..config.search.search_work`;
    with walk-forward ``windows``, in each window's train bars, and the last rung's
    combos over its test bars), never the box it draws from."""
    n_symbols = len(symbol_bars)
    segments = spec.analysis.pbo_segments if spec.search.n_rungs == 1 else 0
    if windows is None:
        sizes, combo_bars = search_work(spec.search, symbol_bars)
        return size_line(sizes[0] * n_symbols, sum(sizes) * n_symbols, segments,
                         float(combo_bars), n_threads)
    trains = windows[:, 1] - windows[:, 0]
    sizes, combo_bars = search_work(spec.search, tuple(trains.tolist()))
    tests = int((windows[:, 3] - windows[:, 2]).sum()) * sizes[-1]
    n_cells = sizes[0] * n_symbols * len(windows) * 2
    return size_line(sizes[0] * n_symbols, n_cells, 0,
                     float((combo_bars + tests) * n_symbols), n_threads)
