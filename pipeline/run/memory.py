"""A block's memory, planned: its estimated peak (:func:`block_bytes`), the chunk shape
that keeps every block of a grid within a budget (:func:`fit_chunks`), and the budget a
worker thread gets (:func:`worker_budget`).

A block's peak is its indicator table (one row of ``n_bars`` float64 per distinct
indicator value, :func:`barsweep.engine.core.hoist.plan_rows`), the bars, and per combo its
parameters, indicator rows, metrics (``N_METRICS`` x runs, held a few times between the
kernel's output and the store's region) and segment sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...engine.core import N_METRICS
from ...engine.strategies import Strategy
from ...errors import SpecError
from ..config.sizes import size_text

#: The share of a worker thread's memory limit its block is planned to: Dask pauses a
#: worker at 80 % of its limit and counts the interpreter, numba's compiled code, Zarr's
#: buffers and the results waiting to be written against it, and the estimate is an
#: estimate: a block takes a quarter (3 GiB of a 12 GiB worker).
MEMORY_SHARE = 0.25

#: float64 columns of ``n_bars`` held besides the table: the bars as read (open, high,
#: low, close, volume, funding), the kernels' :class:`~barsweep.engine.core.inputs.Bars`
#: (six), and an indicator's temporaries while it computes one row.
BAR_WORDS = 16

#: Copies of a combo's metrics alive at the peak: the kernel's output and its reordered
#: copy (``sweep_block``), the task's NaN-filled region, and the store's encoded chunk.
METRIC_COPIES = 5

#: Copies of a rule slot's row: the table's and the rule's memo of computed nodes.
PROGRAM_COPIES = 2


def block_bytes(table_rows: int, n_bars: int, combos: int, runs: int = 1,
                segments: int = 0, n_axes: int = 0, n_slots: int = 0) -> int:
    """A block's estimated peak memory in bytes.

    Parameters
    ----------
    table_rows : int
        Rows of its indicator table (a rule slot's rows counted :data:`PROGRAM_COPIES`
        times, see :func:`table_rows`).
    n_bars : int
        Bars each row covers.
    combos : int
        Combos of the block (its box, before constraints).
    runs : int
        Runs per combo: 1, or a walk-forward block's train and test spans.
    segments : int
        PBO segments each combo sums its returns over (two sums each).
    n_axes, n_slots : int
        The grid's axes and the strategy's indicator slots.

    Returns
    -------
    int

    Examples
    --------
    >>> block_bytes(table_rows=962, n_bars=2_000_000, combos=11_875) // 2**20
    14932
    """
    table = table_rows * n_bars * 8
    bars = BAR_WORDS * n_bars * 8
    per_combo = (METRIC_COPIES * N_METRICS * runs + 6 * segments + 5 * n_axes
                 + 2 * n_slots + 16) * 8
    return table + bars + combos * per_combo


def table_rows(strategy: Strategy, box: dict[str, int]) -> int:
    """Upper bound of the indicator rows of a box holding ``box[name]`` values of each
    parameter (1 for one not there): for each slot, the product of its parameters'
    counts, summed over slots (rows two slots share are counted twice)."""
    total = 0
    for slot in strategy.indicators:
        n = math.prod(box.get(p, 1) for p in slot.params)
        total += n * (PROGRAM_COPIES if slot.program is not None else 1)
    return total


def fit_chunks(names: Sequence[str], chunks: Sequence[int], cost, budget: int) -> tuple[int, ...]:
    """The largest chunk shape within ``chunks`` whose ``cost(shape)`` fits ``budget``.

    ``chunks`` is kept when it fits; else the axis whose halving lowers the cost most
    is halved (rounded up), again until it fits. ``names`` are the axes' names (for
    the refusal); ``cost`` is a function of a chunk shape, growing with each axis.

    Raises
    ------
    SpecError
        When one combo (every chunk 1) does not fit, with the numbers.
    """
    shape = [max(1, int(c)) for c in chunks]
    while (need := cost(tuple(shape))) > budget:
        cuts = [(cost(tuple(shape[:i] + [-(-c // 2)] + shape[i + 1:])), i)
                for i, c in enumerate(shape) if c > 1]
        if not cuts:
            raise SpecError(
                f"run.memory_per_block: one combo of this spec needs ~{size_text(need)} "
                f"per block ({size_text(budget)} allowed, axes {', '.join(names)}); "
                f"raise run.memory_per_block or the workers' memory, or use fewer bars")
        shape[min(cuts)[1]] = -(-shape[min(cuts)[1]] // 2)
    return tuple(shape)


def worker_budget(workers: Sequence[dict], machine_bytes: int) -> int:
    """Bytes a block may take: :data:`MEMORY_SHARE` of the smallest memory a worker
    thread has (its worker's ``memory_limit`` over its ``nthreads``, as Dask's scheduler
    info gives them), or of ``machine_bytes`` over every thread where no worker has a
    limit."""
    shares = [w["memory_limit"] / max(1, w.get("nthreads", 1)) for w in workers
              if w.get("memory_limit")]
    if not shares:
        threads = max(1, sum(w.get("nthreads", 1) for w in workers))
        shares = [machine_bytes / threads]
    return int(MEMORY_SHARE * min(shares))
