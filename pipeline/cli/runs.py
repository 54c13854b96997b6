"""``barsweep run``, ``check`` and ``warm``: a spec run, checked, or its kernels
compiled ahead of time."""

from __future__ import annotations

import argparse
import os
import sys

from ...errors import BarsweepError


def add_run_parsers(sub: argparse._SubParsersAction) -> None:
    """``barsweep run`` and ``barsweep check``."""
    run = sub.add_parser("run", help="run a sweep spec on a Dask cluster into a Zarr store")
    run.add_argument("spec", help="the sweep spec (a YAML file)")
    run.add_argument("--out", help="results store (default: the spec's run.out)")
    run.add_argument("--scheduler", help="address of a running Dask scheduler "
                                         "(tcp://host:8786, or tls://... with --tls-*)")
    run.add_argument("--tls-ca", metavar="PEM", help="CA certificate of a TLS cluster")
    run.add_argument("--tls-cert", metavar="PEM", help="this client's TLS certificate")
    run.add_argument("--tls-key", metavar="PEM", help="this client's TLS private key")
    run.add_argument("--cluster", metavar="KIND", help="where the blocks run: auto (threads "
                     "of this process for a small sweep, else local), threads, local, cuda, "
                     "slurm, pbs or a scheduler address (default: the spec's cluster, auto)")
    run.add_argument("--backend", choices=["auto", "cpu", "cuda"],
                     help="where the kernels run: cpu, cuda, or auto (cuda when every worker "
                          "has a GPU of its own; default: the spec's run.backend, auto)")
    run.add_argument("--workers", type=int, help="workers of the local cluster (threads of "
                                                 "a threads one)")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress line (on a terminal it is redrawn in place; in a "
                          "log it is a line every --progress-every seconds)")
    run.add_argument("--progress-every", type=float, metavar="S",
                     help="seconds between progress lines when stderr is not a terminal "
                          "(default: the spec's run.progress_every, 5)")
    run.add_argument("--quiet", action="store_true",
                     help="print only the final summary (for scripts)")
    run.add_argument("--perf-report", metavar="FILE.html",
                     help="write Dask's performance report of the run (task stream, "
                          "profiles, bandwidth) to this HTML file")
    run.add_argument("--dashboard", action="store_true",
                     help="serve the Dask dashboard with its /barsweep page from this "
                          "process (on 127.0.0.1) on a threads run too; a cluster started "
                          "here always serves one")
    run.add_argument("--max-combos", type=int, metavar="N",
                     help="refuse grids of more than N combos (default: the spec's "
                          "run.max_combos, 1,000,000,000)")
    again = run.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue the results store at --out: compute only missing blocks")
    again.add_argument("--overwrite", action="store_true",
                       help="replace the results store at --out (never anything else)")
    run.add_argument("--worker-timeout", type=float, metavar="S",
                     help="stop when no worker is connected for S seconds "
                          "(default: the spec's run.worker_timeout, 60)")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="validate a sweep spec and compile its strategy "
                           "on this machine; run nothing, write no results")
    check.add_argument("spec", help="the sweep spec (YAML) to check")
    check.set_defaults(func=cmd_check)


def add_warm_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep warm``."""
    warm = sub.add_parser("warm", help="compile strategies' kernels ahead of time (numba's "
                                       "on-disk cache): after an install, in a worker image")
    warm.add_argument("strategies", nargs="*", metavar="STRATEGY",
                      help="strategy names (default: every builtin one)")
    warm.set_defaults(func=cmd_warm)


def add_strategies_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep strategies``."""
    strategies = sub.add_parser("strategies", help="the builtin strategies, their "
                                "parameters and their rules (docs/RULES.md)")
    strategies.set_defaults(func=cmd_strategies)


def cmd_strategies(args) -> int:
    """Each registered strategy: its parameters, then its rules (builtins) or its doc."""
    from ...engine.rules import BUILTIN_RULES
    from ...engine.strategies import get_strategy, strategy_names

    for name in strategy_names():
        strategy = get_strategy(name)
        params = ", ".join(f"{p.name} ({p.kind})" for p in strategy.params) or "none"
        print(f"{name}: parameters {params}")
        rule = BUILTIN_RULES.get(name)
        lines = rule.describe().splitlines() if rule else [strategy.doc.strip().splitlines()[0]
                                                            if strategy.doc.strip() else ""]
        for line in lines:
            print(f"  {line}")
    return 0


def cmd_run(args) -> int:
    """``barsweep run``: the spec with the flags' overrides, run by
    :func:`~barsweep.pipeline.run.orchestrate.run_spec`, then its summary."""
    from ..run.lock import refuse_locked

    if args.out:  # a run holding --out refuses this one before anything heavy is loaded
        refuse_locked(os.path.abspath(os.path.expanduser(args.out)))
    spec = spec_of_args(args)
    if not args.out:  # a run holding the spec's out, before the run's modules load
        refuse_locked(os.path.abspath(spec.run.out))
    from ..run.orchestrate import run_spec

    summary = run_spec(spec, n_workers=args.workers, resume=args.resume,
                       overwrite=args.overwrite, spec_path=args.spec,
                       voice=voice(quiet=args.quiet,
                                   progress=not (args.no_progress or args.quiet)),
                       perf_report=args.perf_report, dashboard=args.dashboard)
    print(summary_line(summary))
    print(f"results in {summary.out}")
    return 0


def spec_of_args(args):
    """The spec ``barsweep run`` runs: its file with the flags' overrides (backend, out,
    max combos, progress, cluster or scheduler and TLS files, worker timeout)."""
    from ..config.model import load_spec
    from ..config.overrides import with_cluster, with_scheduler
    from ..run.cluster import check_address

    if args.scheduler is not None:
        check_address(args.scheduler, "--scheduler")
        if args.cluster is not None:
            raise BarsweepError("--scheduler and --cluster both say where to run: give one")
    spec = load_spec(args.spec, overrides={"run": {
        "backend": args.backend, "out": args.out, "max_combos": args.max_combos,
        "progress_every": args.progress_every}})
    spec = with_scheduler(with_cluster(spec, args.cluster), args.scheduler,
                          {"ca": args.tls_ca, "cert": args.tls_cert, "key": args.tls_key})
    if args.worker_timeout is not None:
        if not 0 < args.worker_timeout < float("inf"):
            raise BarsweepError(f"--worker-timeout: expected seconds > 0, "
                                f"got {args.worker_timeout:g}")
        spec = spec.model_copy(update={"run": spec.run.model_copy(
            update={"worker_timeout": args.worker_timeout})})
    return spec


def voice(quiet: bool = False, progress: bool = True):
    """How a run of the command line speaks (:class:`~barsweep.pipeline.run.orchestrate.
    Voice`): its lines on stdout unless ``quiet``, what it cleared on stderr, the
    progress line, and stops and failures in one line. SIGTERM, which
    :func:`~barsweep.pipeline.cli.main` turns into a KeyboardInterrupt, stops it as
    Ctrl-C does."""
    from ..run.orchestrate import Voice

    return Voice(say=None if quiet else (lambda line: print(line, flush=True)),
                 note=lambda line: print(f"barsweep: {line}", file=sys.stderr, flush=True),
                 progress=progress, one_line=True)


def summary_line(summary) -> str:
    """What a finished run prints: combos, blocks, backend, seconds and throughput."""
    return (f"{summary.n_combos:,} combos in {summary.n_blocks} blocks on {summary.backend}: "
            f"{summary.seconds:.2f} s, "
            f"{summary.combo_bars_per_second / 1e6:,.0f} M combo-bars/s"
            + (f" ({summary.blocks_skipped} blocks were already done)"
               if summary.blocks_skipped else ""))


def cmd_check(args) -> int:
    """What ``barsweep run SPEC`` checks before it makes a store or starts a cluster (the
    spec, its modules, the bars, the grid, that the strategy compiles), and OK with what
    was checked; the same one-line refusal as ``run`` otherwise."""
    from ...engine.warm import describe
    from ..config.model import load_spec
    from ..run.prepare import prepare_run
    from ..run.results import store_attrs

    spec = load_spec(args.spec)
    earlier = store_attrs(spec.run.out) is not None
    prepared = prepare_run(spec, overwrite=earlier, spec_path=args.spec,
                           say=lambda line: print(line, flush=True))
    compiled = ("its kernel is in numba's cache" if prepared.compile_seconds is None
                else f"compiled in {prepared.compile_seconds:.1f} s")
    valid, exact = prepared.grid.estimate_valid()
    symbols = ", ".join(f"{s} ({n:,} bars)" for s, n in
                        zip(prepared.spec.data.symbols, prepared.symbol_bars, strict=True))
    print(f"OK: {args.spec}")
    print(f"  {describe(spec.strategy_def)}: compiles ({compiled})")
    print(f"  bars: {spec.data.timeframe} of {symbols} in {spec.data.store}")
    kind = prepared.kind
    print(f"  grid: {prepared.grid.size:,} combos {kind.accounts.per}, "
          f"{'' if exact else 'at most '}{valid:,} valid{kind.combos.drawn}")
    search = kind.combos.search_line(kind.lane)
    if search:
        print(f"  {search}")
    print(f"  results: {prepared.out}" + (" holds earlier results: `barsweep run` needs "
                                          "--overwrite or --resume" if earlier else ""))
    print(f"  run: {check_size_line(prepared)}")
    return 0


def check_size_line(prepared) -> str:
    """What the run of a checked spec will cost, as the run says it (its store's size
    and time), on the workers a cluster started here would have: one per core this
    process may use; said as such for a cluster elsewhere."""
    from ..config.cluster import STARTED_HERE
    from ..run.cluster import default_workers
    spec = prepared.spec
    segments = prepared.kind.spans.segments(spec.analysis.pbo_segments)
    line = prepared.size_line(segments, default_workers())
    return line + ("" if spec.cluster.kind in STARTED_HERE
                   else f" (this machine's cores; the run is on its {spec.cluster.kind} "
                        f"cluster)")


def cmd_warm(args) -> int:
    from ...engine.strategies import get_strategy, strategy_names
    from ...engine.warm import warm

    names = args.strategies or [n for n in strategy_names() if not n.startswith("_")]
    strategies = [get_strategy(name) for name in names]  # refuse an unknown one up front
    for strategy in strategies:
        print(f"{strategy.name}: ", end="", flush=True)
        seconds, cached = warm(strategy)
        print(f"{'loaded from the cache' if cached else 'compiled'} in {seconds:.1f} s",
              flush=True)
    return 0
