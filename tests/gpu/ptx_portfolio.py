"""Compile the CUDA portfolio kernel to PTX for compute capability 9.0, without a GPU.

    python tests/gpu/ptx_portfolio.py N_SYMBOLS [N_SYMBOLS ...]

As ``ptx_compile.py`` does for the single-symbol kernels (numba's one question to a
device answered with 9.0): ``ema_cross`` with each ``N_SYMBOLS`` symbols, and a rule
reading the position state with the first. Prints one JSON line: per kernel, its PTX
size, its fused multiply-adds and the bytes of its parameters (the entry's ``.param``
list); writes each PTX into the folder ``$PTX_OUT`` when that is set.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.gpu_portfolio_cases import strategy  # noqa: E402
from helpers.ptx import CC, Device  # noqa: E402
from numba import cuda, typeof  # noqa: E402
from numba.core import types  # noqa: E402

from barsweep.engine import N_METRICS, Execution  # noqa: E402
from barsweep.engine.core.execution import run_settings  # noqa: E402
from barsweep.engine.core.inputs import Bars, Combos  # noqa: E402
from barsweep.engine.gpu.portfolio import portfolio_kernel_cuda  # noqa: E402
from barsweep.engine.portfolio.book import Book  # noqa: E402
from barsweep.engine.portfolio.sim import N_STATE, N_SYMBOL_METRICS  # noqa: E402
from barsweep.engine.portfolio.weights import Sizing  # noqa: E402


def param_bytes(ptx: str) -> int:
    """Bytes of the kernel's parameters, read from its entry's ``.param`` list."""
    entry = ptx[ptx.index(".entry"):]
    head = entry[: entry.index("{")]
    total = 0
    for m in re.finditer(r"\.param\s+\.(?:align\s+\d+\s+)?\.?([usbf])(\d+)\s+[^\s,)\[]+(\[\d+\])?",
                         head):
        size = int(m.group(2)) // 8
        total += size * (int(m.group(3)[1:-1]) if m.group(3) else 1)
    return total


def arg_types(n_sym: int, n_params: int) -> tuple:
    """The kernel's argument types for ``n_sym`` symbols (device arrays type as these)."""
    n = 8
    bars = typeof(Bars(*[np.zeros(n)] * 6))
    table = typeof(np.asfortranarray(np.zeros((2, n))))
    combos = Combos(np.zeros((n, 2), dtype=np.int64), np.zeros((n, n_params)),
                    *[np.zeros(n)] * 6, np.zeros(n, dtype=np.int64))
    run = run_settings(Execution(), 8760.0, np.zeros(n))
    index = np.zeros(n, dtype=np.int64)
    book = Book(index, index, index, Sizing(False, *[np.zeros((1, n_sym, n))] * 2,
                                           np.zeros((1, n_sym, 1), dtype=np.int64)),
                np.zeros((1, n), dtype=np.bool_))
    return (types.UniTuple(bars, n_sym), typeof(np.zeros((4, n_sym, n))),
            types.UniTuple(table, n_sym), typeof(combos), typeof(book),
            typeof(run), typeof(np.zeros(n)), typeof(np.zeros((n_sym, N_STATE, n))),
            typeof(np.zeros((n, N_METRICS))), typeof(np.zeros((n, n_sym, N_SYMBOL_METRICS))),
            typeof(np.zeros((n, 0, 2))))


def main(sizes: list[int]) -> None:
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = Device  # the only question asked of a device
    out = os.environ.get("PTX_OUT")
    report = {}
    for name in ("ema_cross", "state_rule"):
        s = strategy(name)
        for n_sym in sizes if name == "ema_cross" else sizes[:1]:
            ptx, _ = cuda.compile_ptx(portfolio_kernel_cuda(s.signal).py_func,
                                      arg_types(n_sym, len(s.params)), cc=CC)
            key = f"{name}-{n_sym}"
            report[key] = {"ptx_chars": len(ptx), "fma": ptx.count("fma.rn.f64"),
                           "param_bytes": param_bytes(ptx)}
            if out:
                Path(out, f"{key}.ptx").write_text(ptx)
    print("PTX " + json.dumps(report))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4])
