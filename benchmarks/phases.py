"""Where a warm ``barsweep run`` or ``barsweep demo`` spends its seconds, phase by phase.

Each sample is a fresh ``python benchmarks/phases.py --child ...`` process that runs the
command line's ``main`` in process with timers wrapped around its stages (the spec read,
the output lock, ``prepare_run``, the cluster's start and close, planning, the store's
creation, the kernel warm-up, the blocks, the store's finish) and around every top-level
import (the seconds a stage spends importing are shown apart). Clocks are
``time.monotonic`` (one clock for parent and child on Linux), so interpreter start-up
(spawn to the child's first line) and exit (``main`` returned to the process gone) are
measured too.

    python benchmarks/phases.py run10k [--repeat 5]   # 10,000 ema_cross combos x 26,280 bars
    python benchmarks/phases.py demo [--repeat 5]     # README's `barsweep demo`

A warm-up run comes first (numba's cache, bytecode). Medians of the samples, with the
1-minute load average before and after.
"""

from __future__ import annotations

import time

T_FIRST = time.monotonic()  # the child's first line: interpreter start-up ends here

import argparse  # noqa: E402
import contextlib  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

N_BARS = 26_280
GRID_10K = {"fast": {"start": 2, "stop": 101, "step": 1},
            "slow": {"start": 110, "stop": 209, "step": 1}}

#: (module, attribute, phase): functions timed in the child, innermost phase wins
STAGES = [
    ("barsweep.pipeline.cli.runs", "spec_of_args", "spec"),
    ("barsweep.pipeline.run.orchestrate", "refuse_early", "lock"),
    ("barsweep.pipeline.run.orchestrate", "store_attrs", "lock"),
    ("barsweep.pipeline.run.orchestrate", "prepare_run", "prepare (bars, fingerprint)"),
    ("barsweep.pipeline.run.orchestrate", "wait_for_workers", "wait for workers"),
    ("barsweep.pipeline.run.orchestrate", "resolve_backend", "plan"),
    ("barsweep.pipeline.run.orchestrate", "plan_run", "plan"),
    ("barsweep.pipeline.run.orchestrate", "create_run_store", "create store"),
    ("barsweep.pipeline.run.orchestrate", "finish_store", "finish store"),
    ("barsweep.pipeline.run.stages", "warm_up", "kernel warm-up"),
    ("barsweep.pipeline.run.stages", "stage_feed", "blocks"),
    ("barsweep.pipeline.run.stages", "execute", "blocks"),
    ("barsweep.pipeline.run.stages", "BarsShipper", "blocks"),
]
CLUSTER = ("barsweep.pipeline.run.cluster", "connect")


class Clock:
    """Seconds per phase: each interval is charged to the innermost open phase; the
    seconds spent in top-level imports are charged to ``<phase>: imports``."""

    def __init__(self) -> None:
        self.stack = ["other (outside the timed stages)"]
        self.seconds: dict[str, float] = {}
        self.last = time.monotonic()
        self.importing = 0
        self.imports: list[tuple[str, str, float]] = []  # (phase, module, seconds)

    def charge(self) -> None:
        """Charge the seconds since the last charge to the open phase."""
        now = time.monotonic()
        name = self.stack[-1] + (": imports" if self.importing else "")
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.last
        self.last = now

    def switch(self, push: str | None) -> None:
        """Open phase ``push``, or close the open one (None)."""
        self.charge()
        if push is None:
            self.stack.pop()
        else:
            self.stack.append(push)

    def flush(self) -> None:
        self.charge()

    @contextlib.contextmanager
    def phase(self, name: str):
        self.switch(name)
        try:
            yield
        finally:
            self.switch(None)

    def timed(self, func, name: str):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.phase(name):
                return func(*args, **kwargs)
        wrapper.timed_phase = name
        return wrapper

    def hook_imports(self, on_import) -> None:
        """Time top-level imports; ``on_import(name, module)`` after each import."""
        import importlib._bootstrap as bootstrap

        original = bootstrap._find_and_load

        def find_and_load(name, import_):
            if self.importing:
                module = original(name, import_)
                on_import(name, module)
                return module
            self.charge()
            self.importing, t0 = 1, time.monotonic()
            try:
                module = original(name, import_)
            finally:
                self.charge()
                self.importing = 0
                self.imports.append((self.stack[-1], name, time.monotonic() - t0))
            on_import(name, module)
            return module
        bootstrap._find_and_load = find_and_load


def installer(clock: Clock):
    """``on_import`` for :meth:`Clock.hook_imports`: wraps the stages as their modules
    are imported (where the command imports them, so imports stay in their phase)."""
    def on_import(name, module) -> None:
        for mod_name, attr, phase in STAGES:
            if mod_name == name and not hasattr(getattr(module, attr), "timed_phase"):
                setattr(module, attr, clock.timed(getattr(module, attr), phase))
        if name == CLUSTER[0] and not hasattr(module.connect, "timed_phase"):
            module.connect = timed_connect(clock, module.connect)
    return on_import


def timed_connect(clock: Clock, connect):

    @contextlib.contextmanager
    def wrapper(*args, **kwargs):
        clock.switch("cluster start")
        with connect(*args, **kwargs) as client:
            clock.switch(None)
            try:
                yield client
            finally:
                clock.switch("cluster close")
        clock.switch(None)
    wrapper.timed_phase = "cluster"
    return wrapper


def child(argv: list[str], out: str) -> None:
    """Run ``barsweep argv`` with the stages timed; the phases to ``out`` as JSON."""
    clock = Clock()
    clock.hook_imports(installer(clock))
    with clock.phase("CLI import"):
        import barsweep.pipeline.cli as cli
    if hasattr(cli, "command"):  # what the `barsweep` program runs
        sys.argv = ["barsweep", *argv]
        code = cli.command()
    else:
        code = cli.main(argv)
    clock.flush()
    Path(out).write_text(json.dumps({"first": T_FIRST, "end": time.monotonic(),
                                     "code": code, "seconds": clock.seconds,
                                     "imports": clock.imports}))


def sample(argv: list[str], cwd: str, pythonpath: str | None = None) -> dict:
    """One child (``pythonpath`` first on its path: another barsweep tree); its phases
    plus start-up, exit and wall."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, __file__, "--child", out, *argv], cwd=cwd,
                          capture_output=True, text=True, env=env)
    t1 = time.monotonic()
    if proc.returncode:
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-3000:])
    got = json.loads(Path(out).read_text())
    os.unlink(out)
    if os.environ.get("PHASES_IMPORTS"):
        for phase, name, took in sorted(got["imports"], key=lambda i: -i[2])[:25]:
            print(f"  import {name} in {phase}: {took:.3f} s")
    seconds = {"interpreter start-up": got["first"] - t0, **got["seconds"],
               "interpreter exit": t1 - got["end"], "WALL": t1 - t0}
    return seconds


def setup(work: Path, what: str) -> tuple[list[str], str]:
    """The command of a case, its bars and spec made in ``work``."""
    if what == "demo":
        return ["demo", "--dir", str(work / "demo")], str(work)
    bars = work / "bars"
    if not bars.exists():
        subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", "data", "synth",
                        "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars", str(N_BARS),
                        "--seed", "7", "--store", str(bars)], check=True, cwd=work,
                       capture_output=True)
    spec = work / "run10k.yaml"
    spec.write_text(json.dumps({
        "data": {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": GRID_10K,
        "execution": {"fill": "close", "fees": 0.001},
        "run": {"out": str(work / "run10k.zarr")}}))
    return ["run", str(spec), "--overwrite", "--quiet"], str(work)


def report(sides: dict[str, list[dict]], load: tuple[float, float], unit: str = "s") -> str:
    """A markdown table: per phase, each side's median (min-max) over its samples, in
    seconds or milliseconds (``unit`` "ms")."""
    scale = 1000.0 if unit == "ms" else 1.0
    names = list(dict.fromkeys(k for samples in sides.values() for s in samples for k in s))
    names = [n for n in names if n != "WALL"] + ["WALL"]
    n = {side: len(samples) for side, samples in sides.items()}
    lines = [f"load 1-min {load[0]:.2f} -> {load[1]:.2f}, runs {n}",
             "| phase | " + " | ".join(f"{side}: median {unit} (min-max)" for side in sides)
             + " |",
             "|---|" + "---|" * len(sides)]
    for name in names:
        cells = []
        for samples in sides.values():
            values = [s.get(name, 0.0) * scale for s in samples]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.2f}-"
                         f"{max(values):.2f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: (attribute of barsweep.engine.backtest.single, phase) timed in one warm ``backtest()``
BACKTEST_STAGES = [("execution_of", "arguments"), ("strategy_of", "arguments"),
                   ("bar_columns", "arguments"), ("infer_ppy", "ppy from times"),
                   ("prepare_inputs", "the kernel's inputs (benchmark returns, packing)"),
                   ("hoist", "signal (indicators)"), ("time_index", "outputs: time index"),
                   ("trades_frame", "outputs: trades table")]


def backtest_phases(n_bars: int, repeat: int) -> list[dict]:
    """Per phase, the seconds of ``repeat`` warm ``backtest()`` calls on ``n_bars``
    bars (ema_cross 10/50, fill close, fees 0.001, ppy from hourly times), as
    ``benchmarks/backtest_latency.py`` makes them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import backtest_latency as bl

    import barsweep.engine  # noqa: F401 - its `backtest` is the function: the module by name
    from barsweep.engine.strategies import get_strategy

    bt = sys.modules["barsweep.engine.backtest.single"]

    bars = bl.make_bars(n_bars)
    bt.backtest(bars, "ema_cross", bl.PARAMS, **bl.EXECUTION)  # warm
    samples = []
    for _ in range(repeat):
        clock = Clock()
        clock.stack = ["outputs: rest (pandas Series, result)"]
        saved = {attr: getattr(bt, attr) for attr, _ in BACKTEST_STAGES}
        strategy = get_strategy("ema_cross")
        kernel = strategy.kernel
        for attr, phase in BACKTEST_STAGES:
            setattr(bt, attr, clock.timed(saved[attr], phase))
        object.__setattr__(strategy, "kernel", clock.timed(kernel, "simulation (kernel)"))
        try:
            t0 = time.perf_counter()
            bt.backtest(bars, "ema_cross", bl.PARAMS, **bl.EXECUTION)
            wall = time.perf_counter() - t0
            clock.flush()
        finally:
            for attr, func in saved.items():
                setattr(bt, attr, func)
            object.__setattr__(strategy, "kernel", kernel)
        samples.append({**clock.seconds, "WALL": wall})
    return samples


GRID_FIRST = {"fast": {"start": 2, "stop": 140, "step": 1},
              "slow": {"start": 150, "stop": 2150, "step": 1}}  # 278,139 combos


def first_blocks(work: Path, workers: int, fast_stop: int = 140) -> list[dict]:
    """A warm ema_cross run of ~278k combos x 26,280 bars on a local cluster of
    ``workers`` processes (``fast_stop`` < 140: fewer fast periods); per block its
    worker, combos, seconds and phases, in the order the driver received them."""
    from barsweep.pipeline.config.model import load_spec
    from barsweep.pipeline.run import orchestrate, stages

    argv, _ = setup(work, "run10k")
    spec_path = work / "first.yaml"
    doc = json.loads(Path(argv[1]).read_text())
    grid = {**GRID_FIRST, "fast": {**GRID_FIRST["fast"], "stop": fast_stop}}
    doc.update(grid=grid, cluster="local")
    doc["run"]["out"] = str(work / "first.zarr")
    spec_path.write_text(json.dumps(doc))
    execute, got = stages.execute, []

    def recording(*args, **kwargs):
        reports = execute(*args, **kwargs)
        got.extend(reports)
        return reports
    stages.execute = recording
    try:
        for _ in range(2):  # the first run warms numba's cache and the page cache
            got.clear()
            t0 = time.monotonic()
            orchestrate.run_spec(load_spec(spec_path), overwrite=True, n_workers=workers)
            wall = time.monotonic() - t0
    finally:
        stages.execute = execute
    seen: set[str] = set()
    rows = []
    for r in got:
        rows.append({"worker": r.worker, "first": r.worker not in seen, "combos": r.n_combos,
                     "seconds": r.seconds, "combos_per_s": r.n_combos / r.seconds,
                     **r.phases})
        seen.add(r.worker)
    print(f"wall {wall:.2f} s")
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[3:], sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["run10k", "demo", "backtest", "first"])
    parser.add_argument("--bars", type=int, default=1_000_000, help="backtest: bars")
    parser.add_argument("--fast-stop", type=int, default=140,
                        help="first: the last fast period (140: ~278k combos)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", default=None, help="keep the bars and stores here")
    parser.add_argument("--json", default=None, help="also write the samples here")
    parser.add_argument("--before", default=None, metavar="PATH",
                        help="a directory holding another `barsweep` package tree: its "
                        "runs (on PYTHONPATH) alternate with this tree's")
    args = parser.parse_args()
    if args.what == "backtest":
        load0 = os.getloadavg()[0]
        samples = backtest_phases(args.bars, args.repeat)
        print(report({"this tree": samples}, (load0, os.getloadavg()[0]), unit="ms"))
        return
    if args.what == "first":
        work = Path(args.work or tempfile.mkdtemp(prefix="phases-"))
        rows = first_blocks(work, 2, args.fast_stop)
        keys = list(dict.fromkeys(k for r in rows for k in r))
        print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
        for r in rows:
            print("| " + " | ".join(f"{r.get(k, ''):.3f}" if isinstance(r.get(k), float)
                                    else str(r.get(k, "")) for k in keys) + " |")
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="phases-"))
    work.mkdir(parents=True, exist_ok=True)
    argv, cwd = setup(work, args.what)
    paths = {"after": None} if args.before is None else {"before": args.before,
                                                         "after": None}
    for path in paths.values():
        sample(argv, cwd, path)  # warm-up
    load0 = os.getloadavg()[0]
    sides: dict[str, list[dict]] = {side: [] for side in paths}
    for _ in range(args.repeat):
        for side, path in paths.items():
            sides[side].append(sample(argv, cwd, path))
    print(report(sides, (load0, os.getloadavg()[0])))
    if args.json:
        Path(args.json).write_text(json.dumps(sides, indent=1))


if __name__ == "__main__":
    main()
