"""A block's constraint mask: the engine's numpy evaluation against a numba kernel.

    python benchmarks/constraint_mask.py [COMBOS=1000000]

A block's task keeps the combos its grid's constraints hold for
(:func:`barsweep.engine.expr.holds`: numpy over the block's arrays, a flat program per
constraint set). For each case this prints the median of 15 masks (after one) over a
block of about COMBOS combos, and the same for a numba kernel written here from the
same trees (a loop over the combos, ``!=`` as the rule runtime's ``ne``) with its
compile time in this process: what compiled code would cost a worker instead. The
numba side is a measurement only: it exits 1 if its mask differs from the engine's.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
from numba import njit

from barsweep.engine.expr import Node, holds
from barsweep.pipeline.config.expr import parse_expr
from barsweep.pipeline.config.grid import box_combos

CASES = {
    "fast < slow": ["fast < slow"],
    "2 <= fast < slow and stop < 0.1": ["2 <= fast < slow and stop < 0.1"],
    "arithmetic, != (one constraint)": [
        "fast * 2 + 1 <= slow - 3 and (stop * 100 > fast / 10 or not slow != 50)"],
    "three constraints": ["fast < slow", "stop < 0.15", "slow - fast >= 5"],
    "stop != 0.1 (float !=)": ["stop != 0.1"],
}


def median_s(call, repeats: int = 15) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def loop_source(nodes: tuple[Node, ...], names: list[str]) -> str:
    """A numba kernel's source from the trees (names are the grid's axes, checked)."""

    def code(node: Node) -> str:
        if node.kind == "num":
            return repr(float(node.value) if isinstance(node.value, float) else node.value)
        if node.kind == "name":
            assert node.value in names
            return f"{node.value}[i]"
        args = [code(a) for a in node.args]
        if node.kind == "neg":
            return f"(-{args[0]})"
        if node.kind == "not":
            return f"(not {args[0]})"
        if node.kind == "cmp" and node.value == "!=":
            return f"({args[0]} < {args[1]} or {args[0]} > {args[1]})"
        joiner = f" {node.value} " if node.kind in ("op", "cmp") else f" {node.kind} "
        return f"({joiner.join(args)})"

    body = " and ".join(code(n) for n in nodes)
    return (f"def mask({', '.join(names)}, out):\n"
            f"    for i in range(out.shape[0]):\n"
            f"        out[i] = {body}\n")


def main(n_combos: int) -> int:
    side = round(n_combos ** (1 / 3))
    axes = (("fast", np.arange(2, 2 + side, dtype=np.int64)),
            ("slow", np.arange(10, 10 + side, dtype=np.int64)),
            ("stop", np.linspace(0.01, 0.2, side)))
    values = box_combos(axes)
    names = [name for name, _ in axes]
    n = len(values["fast"])
    print(f"{n:,} combos; box_combos {1e3 * median_s(lambda: box_combos(axes), 5):.1f} ms\n")
    print("| constraints | kept | numpy (engine) ms | numba ms | numba compile s |")
    print("|---|---|---|---|---|")
    bad = 0
    for label, texts in CASES.items():
        nodes = tuple(parse_expr(t).node for t in texts)
        kept = holds(nodes, values)
        scope: dict = {}
        exec(loop_source(nodes, names), scope)  # our own trees' source, a measurement
        start = time.perf_counter()
        kernel = njit(error_model="numpy")(scope["mask"])
        out = np.empty(n, dtype=bool)
        kernel(*(values[k] for k in names), out)
        compile_s = time.perf_counter() - start
        bad += not np.array_equal(out, kept)
        numpy_ms = 1e3 * median_s(lambda nodes=nodes: holds(nodes, values))
        numba_ms = 1e3 * median_s(
            lambda kernel=kernel, out=out: kernel(*(values[k] for k in names), out))
        print(f"| `{label}` | {int(kept.sum()):,} | {numpy_ms:.2f} | {numba_ms:.2f} "
              f"| {compile_s:.2f} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000))
