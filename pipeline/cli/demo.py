"""``barsweep demo``: synthetic bars, a sweep and its top 10, the best combo's deflated
Sharpe, and the walk-forward of the example spec."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...errors import BarsweepError
from .data import DEMO_BARS


def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep demo``."""
    demo = sub.add_parser("demo", help="synthetic BTCUSDT bars, an ema_cross sweep, the top 10")
    demo.add_argument("--dir", default="barsweep-demo", help="where bars and results go")
    demo.add_argument("--workers", type=int, help="workers of a local cluster (threads of a "
                                                  "threads one; default: one per core)")
    demo.add_argument("--cluster", default="auto", metavar="KIND",
                      help="auto (threads here: the demo is small), threads or local")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from ...datasets import write_synth
    from ..analysis.rank import rank
    from ..analysis.walkforward import walkforward
    from ..config.model import load_spec
    from ..run.orchestrate import cluster_client, run_spec
    from .ranking import format_table
    from .runs import summary_line, voice

    root = Path(args.dir)
    store = root / "bars"
    write_synth(store, "BTCUSDT", "1h", DEMO_BARS, 7)
    print(f"wrote {DEMO_BARS:,} synthetic 1h BTCUSDT bars to {store}")
    spec, out = demo_spec(store, root / "results.zarr"), root / "results.zarr"
    example = Path(__file__).parents[1] / "examples" / "ema_cross_walkforward.yaml"
    wf_out = root / "results_wf.zarr"
    wf_spec = load_spec(example, {"data": {"store": str(store)}, "run": {"out": str(wf_out)}})
    with cluster_client(demo_cluster(args.cluster), spec.param_grid.estimate_valid()[0] * DEMO_BARS,
               spec.run.backend, args.workers) as (client, where):
        summary = run_spec(spec, overwrite=out.exists(), client=client, cluster=where,
                           voice=voice())
        print(summary_line(summary))
        print(f"\ntop 10 of {summary.out} by sharpe, n_trades >= 10:")
        top = rank(summary.out, by="sharpe", top=10, where="n_trades >= 10")
        print(format_table(top, "sharpe"))
        print(f"\nwalk-forward ({example.name}):", flush=True)
        print(summary_line(run_spec(wf_spec, overwrite=wf_out.exists(), client=client,
                                    cluster=where, voice=voice(quiet=True, progress=False))))
    wf = walkforward(wf_out, by="sharpe", where="n_trades >= 3")
    best = top.iloc[0]
    stitched = wf.stitched
    print(f"\nbest combo: fast {best['fast']}, slow {best['slow']}: sharpe "
          f"{best['sharpe']:.3f}, deflated sharpe (DSR) {best['dsr']:.3f} after "
          f"{summary.n_combos:,} trials")
    print(f"walk-forward, best train sharpe in each of {len(wf.windows)} windows: "
          f"out-of-sample cagr {stitched['cagr']:.1%}, sharpe {stitched['sharpe']:.2f}, "
          f"efficiency {stitched['efficiency']:.2f} (out-of-sample / in-sample cagr)")
    print(f"\nmore: barsweep rank {summary.out} --by dsr --top 20; barsweep rank "
          f"{summary.out} --pbo; barsweep walkforward {wf_out}")
    return 0


def demo_spec(store: Path, out: Path):
    """The demo's sweep: ema_cross, fast 2..50 x slow 10..200 (fast < slow), filled at the
    next open with 0.1 % fees, over the synthetic BTCUSDT bars in ``store``."""
    from ..config.model import parse_spec

    return parse_spec({
        "data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 50, "step": 1},
                 "slow": {"start": 10, "stop": 200, "step": 2}},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.001},
        "run": {"out": str(out)},
    }, source="demo")


def demo_cluster(kind: str):
    """``--cluster`` as a spec's ``cluster`` value; BarsweepError naming the problem."""
    from ..config.cluster import ClusterSpec

    try:
        return ClusterSpec.model_validate(kind)
    except ValueError as err:
        raise BarsweepError(f"--cluster: {' '.join(str(err).split())}") from None
