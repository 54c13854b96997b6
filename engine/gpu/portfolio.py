"""Portfolio sweeps on a GPU: the CPU's per-bar portfolio simulation compiled by
numba.cuda, one thread per combo.

One arithmetic source, as for single-symbol sweeps (:mod:`barsweep.engine.gpu.sweep`): the
CUDA kernel calls the very
:func:`~barsweep.engine.portfolio.sim.simulate_portfolio` (and through it the signal's
``step`` and ``scan``, ``fills`` and the ``metrics`` accumulators) that the CPU
portfolio kernel inlines; numba.cuda compiles each as a device function.

Device layout, per thread and per symbol:

- the per-symbol scratch ``state`` is one device array, shape ``(N, N_STATE,
  threads)``, each thread working on its slice ``state[:, :, thread]``: threads
  interleave in memory, so a warp's accesses to ``state[i, j]`` coalesce, and it holds
  any number of symbols (a ``cuda.local.array`` needs its size at compile time, a
  ceiling on N compiled into the kernel); it takes ``N * N_STATE * 8`` bytes per
  launched thread, at most one thread per combo;
- each symbol's indicator table is column-major (at bar ``t`` neighbouring rows are
  neighbours in memory, and combos run in indicator-locality order), the N tables a
  tuple indexed by symbol; the tables are hoisted on the host (once per symbol and
  value, as the CPU's) and copied;
- each symbol's bars are a :class:`~barsweep.engine.core.inputs.Bars` of device arrays, the N
  of them a tuple, as the signals read them; the prices as one ``(2, N, n_bars)``
  array.

The tuples are kernel parameters: each symbol adds its 6 bar arrays and its table to
the parameter space (:func:`param_bytes`), which a GPU limits (:data:`MAX_PARAM_BYTES`);
:func:`portfolio_cuda_problem` says when a portfolio has too many symbols for it.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...errors import BackendError
from ..core.inputs import Combos
from ..portfolio.book import Book
from ..portfolio.sim import N_STATE, simulate_portfolio
from ..portfolio.weights import Sizing
from ..strategies import kernels
from .sweep import device_bars, launch_shape, require_cuda

#: Kernel parameter bytes a launch may take: CUDA 12.1+ on compute capability 7.0+
#: (4,096 before).
MAX_PARAM_BYTES = 32_764
#: Bytes of parameter space one symbol takes: its 6 bar arrays (7 words each) and its
#: indicator table (a 2-d array: 9 words).
SYMBOL_PARAM_BYTES = 8 * (6 * 7 + 9)
#: Bytes of the portfolio kernel's other parameters (an upper bound).
OTHER_PARAM_BYTES = 2_048

#: Cache: the CUDA portfolio kernel built for each (step, scan), once per process.
_KERNELS: dict[tuple, object] = {}


def param_bytes(n_symbols: int) -> int:
    """An upper bound of the portfolio kernel's parameter bytes for ``n_symbols``."""
    return OTHER_PARAM_BYTES + n_symbols * SYMBOL_PARAM_BYTES


def portfolio_cuda_problem(n_symbols: int) -> str | None:
    """Why a portfolio of ``n_symbols`` cannot run on the GPU (None if it can)."""
    if param_bytes(n_symbols) > MAX_PARAM_BYTES:
        most = (MAX_PARAM_BYTES - OTHER_PARAM_BYTES) // SYMBOL_PARAM_BYTES
        return (f"a portfolio of {n_symbols} symbols is more than the CUDA kernel takes "
                f"({most}: each symbol's bars are kernel parameters); use backend 'cpu'")
    return None


def portfolio_kernel_cuda(signal):
    """The CUDA portfolio kernel of ``signal`` (built and compiled once per process),
    called ``kernel[blocks, threads](sbars, px, ind, combos, book, run, bench, state, out,
    per_symbol, segs)``."""
    module = kernels.compiled(signal)
    key = (module.step, module.scan, module.ACCOUNT)
    if key not in _KERNELS:
        _KERNELS[key] = _build_kernel(*key)
    return _KERNELS[key]


def _build_kernel(step, scan, account):
    @cuda.jit
    def kernel(sbars, px, ind, combos, book, run, bench, state, out, per_symbol, segs):
        first = cuda.grid(1)
        mine = state[:, :, first]
        for c in range(first, combos.rows.shape[0], cuda.gridsize(1)):
            simulate_portfolio(step, scan, account, sbars, px, ind, combos, book, c, run,
                               bench, mine, out, per_symbol, segs, None)

    return kernel


def column_major(table: np.ndarray) -> np.ndarray:
    """``table`` (n_rows, n_bars) as a column-major array of at least two rows (a
    one-row array would be typed C-contiguous: another kernel variant)."""
    out = np.zeros((max(2, table.shape[0]), table.shape[1]), order="F")
    out[: table.shape[0]] = table
    return out


def run_portfolio_cuda(signal, sbars, px, ind, combos, book, run, bench, metrics,
                       per_symbol, segs) -> None:
    """:func:`~barsweep.engine.portfolio.sweep.run_portfolio_kernel` on the GPU: the same
    arrays (on the host) but the members' bars, ``sbars``, a tuple of each one's
    :class:`~barsweep.engine.core.inputs.Bars` (the kernel is compiled for each number of
    members, which its parameter space bounds); ``signal``'s CUDA kernel, ``metrics``
    and ``per_symbol`` written.

    Raises
    ------
    BackendError
        Without a usable GPU, or for more symbols than the kernel's parameters hold.
    """
    require_cuda()
    n_sym = len(sbars)
    problem = portfolio_cuda_problem(n_sym)
    if problem:
        raise BackendError(f"backend 'cuda': {problem}")
    blocks, threads = launch_shape(combos.rows.shape[0])
    d_state = cuda.device_array((n_sym, N_STATE, blocks * threads))
    d_out = cuda.device_array(metrics.shape)
    d_sym = cuda.device_array(per_symbol.shape)
    d_segs = cuda.to_device(segs)
    portfolio_kernel_cuda(signal)[blocks, threads](
        tuple(device_bars(b, None) for b in sbars), cuda.to_device(px),
        tuple(cuda.to_device(column_major(table)) for table in ind),
        Combos(*(cuda.to_device(np.ascontiguousarray(f)) for f in combos)),
        device_book(book), run, cuda.to_device(bench), d_state, d_out, d_sym, d_segs)
    d_out.copy_to_host(metrics)
    d_sym.copy_to_host(per_symbol)
    d_segs.copy_to_host(segs)


def device_book(book: Book) -> Book:
    """``book`` with every array copied to the device (contiguous)."""
    def dev(a):
        return cuda.to_device(np.ascontiguousarray(a))

    sizing = book.sizing
    return Book(dev(book.max_positions), dev(book.lookback), dev(book.rebalance),
                Sizing(sizing.inverse_vol, dev(sizing.inv_vol), dev(sizing.top_sum),
                       dev(sizing.order)), dev(book.rebalance_bars))
