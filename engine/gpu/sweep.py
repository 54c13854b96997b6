"""GPU sweeps: the CPU's per-bar simulation compiled by numba.cuda, one thread per combo.

One arithmetic source: the CUDA kernel calls the very ``simulate`` (and through it the
strategy's ``step``/``scan`` of :mod:`~barsweep.engine.strategies.kernels`, ``fills`` and
the ``metrics`` accumulators) that the CPU kernels inline. numba.cuda compiles each plain
``@njit`` function it meets as a device function, so nothing is typed twice. Per strategy
the kernel is built once per process (closures cannot go to numba's on-disk cache; a GPU
worker compiles once and keeps it).

Data flow of :func:`sweep_cuda` (docs/EXECUTION.md "On a GPU": the bars move by reference):

- the bars (and their benchmark returns) go to the device once per process and stay
  there, keyed by the caller's ``bars_key`` (the pipeline passes the store's fingerprint
  and the time range), for the worker's later blocks;
- the indicators are hoisted on the device, one thread per distinct row
  (:mod:`barsweep.engine.gpu.hoist`: the CPU's own allocation-free row functions), so
  only the bars cross PCIe;
- the indicator table lives on the device in column-major order: at bar ``t`` the
  threads of a warp read neighbouring rows (combos are in
  :func:`~barsweep.engine.core.inputs.lane_order`: a warp's lanes hold neighbouring values
  of the finest axis and share the others' rows), so the reads coalesce and the lanes branch alike;
- the combos go over as the grid gives them; when the kernel's lane order differs,
  they are gathered into it on the device (:func:`device_combos`), and the metrics put
  back in the grid's order there (:func:`restore_order`): the host permutes nothing;
- one thread per combo (grid-stride loop) runs ``simulate`` in lockstep, one bar per
  iteration, so the 32 lanes of a warp stay on the same bar: on each bar a lane takes
  its flat check, its held step or the general step (the warp runs the union of the
  three, masked), and the loop reconverges before the next bar (on the check's grids the
  warp model predicts 0.98-0.99 of the lanes busy, against 0.45-0.84 when each thread
  scans its stretches at its own pace as the CPU does, in the same lane order); it
  writes its metrics row
  into a device array the thread's next block of the same shape reuses
  (:func:`reused_array`); the block's metrics come back to the host and are written to
  Zarr like a CPU block.

Without a GPU every function here still imports; :func:`cuda_problem` says why a run
cannot use CUDA. Under ``NUMBA_ENABLE_CUDASIM=1`` (set before numba is imported) the
kernels run in numba's CUDA simulator: that is how CI checks them against the CPU.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from numba import config, cuda

from ...errors import BackendError, SpecError
from ..core.execution import Execution
from ..core.inputs import Bars, Combos, is_identity, lane_order, prepare_inputs
from ..core.metrics import N_METRICS
from ..core.simulate import Outputs, simulate
from ..strategies import kernels
from ..strategies.base import Strategy
from .hoist import device_indicators

#: Threads per CUDA block: a few warps, enough registers for the long per-thread state.
THREADS_PER_BLOCK = 128
#: Blocks that must fit on a multiprocessor at once: the launch bounds
#: ``(THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)`` hold the kernel to 65,536 registers /
#: (128 x 4) = 128 per thread, 16 warps per SM (above 128, 12 fit); ptxas fits the
#: ema_cross kernel in them without spilling (tests/gpu/test_registers.py).
MIN_BLOCKS_PER_SM = 4
#: At most this many blocks per multiprocessor; a grid-stride loop covers more combos.
MAX_BLOCKS_PER_SM = 32
#: Device bar sets kept per process (a worker usually sweeps one or two symbols at a time).
MAX_CACHED_BARS = 4

#: Cache: the CUDA sweep kernel built for each (step, scan); building and compiling one
#: takes seconds, and every block of a run asks for it again.
_KERNELS: dict[tuple, object] = {}
#: Cache: the device copies of the last MAX_CACHED_BARS bar sets, by ``bars_key``; a block
#: of a symbol already on the device uploads nothing (a 1M-bar set is 48 MB to copy).
_BARS: OrderedDict[Hashable, tuple] = OrderedDict()
_BARS_LOCK = threading.Lock()  # worker threads share _BARS


def cuda_problem() -> str | None:
    """Why CUDA kernels cannot run here, or None if they can: no driver or no GPU, or no
    NVVM (the CUDA compiler library, from the ``nvidia-cuda-nvcc-cu12`` wheel)."""
    try:
        if cuda.is_available():
            return None
        if config.ENABLE_CUDASIM:  # pragma: no cover - the simulator is always available
            return None
        from numba.cuda.cudadrv import driver

        driver.driver.get_device_count()  # raises when the driver or a GPU is missing
    except Exception as exc:
        detail = " ".join(str(exc).split())[:200]
        return f"no usable CUDA GPU ({type(exc).__name__}: {detail})"
    return ("a CUDA GPU is visible but numba.cuda cannot compile for it (NVVM missing?); "
            "install barsweep[cuda]")


def require_cuda() -> None:
    """Raise :class:`BackendError` unless CUDA kernels can run in this process."""
    problem = cuda_problem()
    if problem:
        raise BackendError(f"backend 'cuda': {problem}; use backend 'cpu' or 'auto'")


def strategy_functions(strategy: Strategy) -> tuple:
    """The ``(step, scan)`` pair the strategy's kernel passes to ``simulate``: its signal in
    the 11-argument form the simulation calls (:func:`kernels.compiled`'s ``step``) and
    its ``scan``, as the strategy names them (``Strategy(..., signal=signal, scan=scan)``)."""
    if strategy.signal is None or strategy.scan is None:
        raise SpecError(f"strategy {strategy.name!r}: for the GPU, name its rule in the "
                        f"Strategy: Strategy(..., signal=signal, scan=scan) (see "
                        f"docs/STRATEGIES.md)")
    return kernels.compiled(strategy.signal).step, strategy.scan


def sweep_kernel(strategy: Strategy, lockstep: bool = True):
    """The strategy's CUDA sweep kernel (built and compiled once per process).

    ``lockstep`` (the default) runs ``simulate`` one bar per iteration, so the lanes of a
    warp stay on the same bar (warp-synchronous: their loads coalesce and they branch
    alike, benchmarks/warp_model.py); False lets each thread scan its flat and held
    stretches at its own pace, as the CPU does (kept to measure the two side by side:
    benchmarks/gpu_check.py). Compiled for the CPU the two give the same bits
    (tests/engine/test_lockstep.py); on a GPU NVVM may fuse their multiply-adds
    differently, so their last bits may differ.
    """
    step, scan = strategy_functions(strategy)
    key = (step, scan, lockstep)
    if key not in _KERNELS:
        _KERNELS[key] = _build_kernel(step, scan, lockstep)
    return _KERNELS[key]


def _build_kernel(step, scan, lockstep):
    # launch bounds cap the registers (MIN_BLOCKS_PER_SM); the simulator's jit takes none
    bounds = {} if config.ENABLE_CUDASIM else {
        "launch_bounds": (THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM)}

    @cuda.jit(**bounds)
    def kernel(bars, ind, combos, run, out):
        for c in range(cuda.grid(1), combos.rows.shape[0], cuda.gridsize(1)):
            simulate(step, scan, bars, ind, combos, c, run, out, lockstep, None)

    return kernel


def device_bars(columns: Bars, key: Hashable | None) -> Bars:
    """The bar columns on the device, as :class:`~barsweep.engine.core.inputs.Bars`: cached
    under ``key`` (None: copied, not cached).

    The cache keeps the MAX_CACHED_BARS most recently used sets; it is shared by the
    threads of a worker (a lock guards it).
    """
    if key is not None:
        with _BARS_LOCK:
            if key in _BARS:
                _BARS.move_to_end(key)
                return _BARS[key]
    moved = Bars(*(cuda.to_device(np.ascontiguousarray(c)) for c in columns))
    if key is not None:
        with _BARS_LOCK:
            _BARS[key] = moved
            while len(_BARS) > MAX_CACHED_BARS:
                _BARS.popitem(last=False)
    return moved


def launch_shape(n: int) -> tuple[int, int]:
    """``(blocks, threads per block)`` for ``n`` threads: every combo gets a thread, up to
    MAX_BLOCKS_PER_SM blocks per multiprocessor (the grid-stride loop covers the rest)."""
    try:
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    except Exception:  # the simulator's fake device has no attributes to speak of
        sms = 1
    blocks = max(1, min(math.ceil(n / THREADS_PER_BLOCK), MAX_BLOCKS_PER_SM * sms))
    return blocks, THREADS_PER_BLOCK


def sweep_cuda(
    strategy: Strategy,
    bars: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    execution: Execution,
    ppy: float,
    bars_key: Hashable | None = None,
    timings: dict[str, float] | None = None,
    *,
    spans: Sequence[tuple[int, int]] | None = None,
    seg_sums: np.ndarray | None = None,
    lockstep: bool = True,
) -> np.ndarray:
    """:func:`barsweep.engine.sweep_block` on the GPU: the same arguments, the same result.

    ``bars_key`` identifies the bars (e.g. store fingerprint and time range) so the
    device copy is reused by later calls in this process; None copies them every call.
    ``timings``, when given, receives the seconds of the device stages (``bars``,
    ``hoist``, ``kernel``, ``copy_back``), the device synchronized after each.
    ``lockstep``: which kernel (:func:`sweep_kernel`).

    Returns
    -------
    ndarray, shape (n_combos, N_METRICS) (with ``spans``: (n_spans, n_combos,
    N_METRICS)), float64, in ``METRICS`` order.
    """
    require_cuda()
    clock = _Clock(timings)
    inputs = prepare_inputs(strategy, bars, params, execution, ppy)
    d_bars = device_bars(inputs.bars,
                         None if bars_key is None else (bars_key, execution.funding))
    clock.lap("bars")
    ind, rows = device_indicators(strategy, inputs.columns, inputs.strategy_params, inputs.n_combos,
                                  d_bars)
    clock.lap("hoist")
    order = lane_order(rows)
    d_order = None if is_identity(order) else cuda.to_device(order)
    runs = inputs.runs(spans)
    n_segs = 0 if seg_sums is None else seg_sums.shape[1]
    d_out = reused_array("out", (len(runs), inputs.n_combos, N_METRICS))
    d_segs = cuda.device_array((inputs.n_combos, max(n_segs, 1), 2))[:, :n_segs]
    kernel = sweep_kernel(strategy, lockstep)
    blocks, threads = launch_shape(inputs.n_combos)
    combos = device_combos(inputs.combos(rows), d_order)
    clock.lap("pack")
    for k, run in enumerate(runs):
        kernel[blocks, threads](d_bars, ind, combos, run,
                                Outputs(d_out[k], d_segs))
    clock.lap("kernel")
    out = np.empty((len(runs), inputs.n_combos, N_METRICS))
    restore_order(d_out, d_order).copy_to_host(out)
    if seg_sums is not None:
        seg_sums[order] = d_segs.copy_to_host()
    clock.lap("copy_back")
    return out[0] if spans is None else out


def device_combos(combos: Combos, d_order) -> Combos:
    """``combos`` on the device, in the kernel's order: ``combos.take(order)`` gathered
    there (``d_order``, the order on the device; None: as they are)."""
    if d_order is None:
        return Combos(*(cuda.to_device(field) for field in combos))
    moved = []
    for field in combos:
        taken = cuda.device_array(field.shape, dtype=field.dtype)
        as_rows = (len(field), field.shape[1] if field.ndim == 2 else 1)
        _launch(_take_rows, cuda.to_device(field).reshape(*as_rows), d_order,
                taken.reshape(*as_rows))
        moved.append(taken)
    return Combos(*moved)


def restore_order(d_out, d_order):
    """The kernel's metrics ``d_out`` (shape (n_runs, n_combos, N_METRICS), kernel order)
    in the block's combo order, on the device: ``d_out`` itself when the orders agree,
    else a (reused) device array where combo ``d_order[i]`` is row ``i`` of ``d_out``."""
    if d_order is None:
        return d_out
    back = reused_array("back", d_out.shape)
    for k in range(d_out.shape[0]):
        _launch(_put_rows, d_out[k], d_order, back[k])
    return back


@cuda.jit
def _take_rows(src, index, dst):
    """``dst[i, j] = src[index[i], j]``, one thread per element."""
    width = dst.shape[1]
    for t in range(cuda.grid(1), dst.shape[0] * width, cuda.gridsize(1)):
        i = t // width
        dst[i, t - i * width] = src[index[i], t - i * width]


@cuda.jit
def _put_rows(src, index, dst):
    """``dst[index[i], j] = src[i, j]``, one thread per element."""
    width = src.shape[1]
    for t in range(cuda.grid(1), src.shape[0] * width, cuda.gridsize(1)):
        i = t // width
        dst[index[i], t - i * width] = src[i, t - i * width]


def _launch(kernel, src, index, dst) -> None:
    """Run one of the row-permuting kernels over every element of ``src`` (shape
    (n, width), as ``dst``)."""
    n = src.shape[0] * src.shape[1]
    if n:
        blocks, threads = launch_shape(n)
        kernel[blocks, threads](src, index, dst)


#: Per thread: the device arrays a block's outputs went to, reused by the next block
#: of the same shape (a worker's blocks are mostly one size).
_REUSED = threading.local()


def reused_array(name: str, shape: tuple):
    """A float64 device array of ``shape`` kept under ``name`` for this thread: the one
    of the thread's previous call when its shape was the same (its contents are
    stale), else a new one that replaces it."""
    arrays = _REUSED.__dict__.setdefault("arrays", {})
    if name not in arrays or arrays[name].shape != tuple(shape):
        arrays.pop(name, None)  # free the old one before the new one is allocated
        arrays[name] = cuda.device_array(shape)
    return arrays[name]


class _Clock:
    """Stage timings for :func:`sweep_cuda` (a no-op without a ``timings`` dict)."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings = timings
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        if self.timings is None:
            return
        cuda.synchronize()
        now = time.perf_counter()
        self.timings[name] = now - self.t
        self.t = now
