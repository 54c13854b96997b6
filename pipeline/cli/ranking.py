"""``barsweep rank`` and ``walkforward``: the best combos of a results store, as tables
for people or JSON for scripts."""

from __future__ import annotations

import argparse
import json
import math
import sys

from ...errors import BarsweepError
from ..config.dims import SAMPLES
from .options import add_import_modules


def add_rank_parsers(sub: argparse._SubParsersAction) -> None:
    """``barsweep rank`` and ``barsweep walkforward``."""
    rank = sub.add_parser("rank", help="the best combos of a results store")
    add_rank_arguments(rank)
    rank.add_argument("results", help="the results store (a run's --out)")
    rank.add_argument("--partial", action="store_true",
                      help="rank an incomplete store (an interrupted run) as it is")
    rank.add_argument("--smooth", type=int, metavar="R",
                      help="rank by --by averaged over each combo's neighbourhood of radius "
                           "R grid steps in every parameter (excluded combos do not count)")
    rank.add_argument("--across", metavar="DIM",
                      help="rank parameter combos by --by aggregated across DIM (symbol); "
                           "with --pareto, one front of the aggregated metrics")
    rank.add_argument("--agg", default="median", metavar="HOW",
                      help="with --across: median (default), mean or min")
    rank.add_argument("--pareto", metavar="M1,M2",
                      help="print the non-dominated combos by these metrics, e.g. "
                           "sharpe,max_drawdown: one front per symbol (and walk-forward "
                           "window) unless --across symbol")
    rank.add_argument("--pbo", action="store_true",
                      help="print the probability of backtest overfitting (CSCV) per symbol")
    rank.add_argument("--rung", type=int, metavar="N",
                      help="a search store: rank the combos whose last rung was N (0 "
                           "first; default the last rung, whose combos ran every bar)")
    rank.set_defaults(func=cmd_rank)

    wf = sub.add_parser("walkforward", help="a walk-forward store: the combo chosen in each "
                        "window's train sample, its test, and the stitched out-of-sample run")
    wf.add_argument("results", help="a walk-forward results store (a run's --out)")
    wf.add_argument("--by", default="sharpe", help="metric the train sample chooses by "
                    "(default sharpe)")
    wf.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    wf.add_argument("--symbol", help="the symbol, when the store holds several")
    wf.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    add_import_modules(wf)
    wf.set_defaults(func=cmd_walkforward)


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", default="sharpe", help="metric to rank by (default sharpe)")
    parser.add_argument("--top", type=int, default=20, help="how many combos (default 20)")
    parser.add_argument("--where", help="filter over metrics, parameters and symbol, e.g. "
                                        "\"n_trades >= 10 and symbol == 'MSFT'\"")
    parser.add_argument("--symbol", help="rank this symbol's combos only")
    parser.add_argument("--sample", choices=SAMPLES,
                        help="a walk-forward store: the sample ranked (default train)")
    order = parser.add_mutually_exclusive_group()
    order.add_argument("--ascending", dest="ascending", action="store_true", default=None,
                       help="smaller --by first (the default for volatility, ulcer_index, ruined)")
    order.add_argument("--descending", dest="ascending", action="store_false",
                       help="larger --by first (the default for most metrics)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON array for scripts (combos only, no buy and hold)")


def cmd_walkforward(args) -> int:
    from ..analysis.walkforward import format_walkforward, walkforward

    result = walkforward(args.results, by=args.by, where=args.where, symbol=args.symbol)
    print(json.dumps(result.to_json(), indent=1) if args.json else format_walkforward(result))
    return 0


def cmd_rank(args) -> int:
    from ..analysis.kinds import kind_of
    from ..analysis.rank import pareto_front, pbo_table, rank, to_records
    from ..analysis.stream import count_computed, open_store
    from ..run.results import store_status

    clash = next((f"{a} and {b}" for a, b, both in (
        ("--agg", "no --across", args.agg != "median" and not args.across),
        ("--pbo", "--pareto", args.pbo and args.pareto),
        ("--pbo", "--smooth/--across", args.pbo and (args.smooth or args.across)),
        ("--pareto", "--smooth", args.pareto and args.smooth),
    ) if both), None)
    if clash:
        print(f"barsweep: error: {clash} do not go together; --agg needs --across symbol, "
              f"--pbo stands alone, and --pareto takes no --smooth", file=sys.stderr)
        return 2
    ds = open_store(args.results, partial=args.partial)
    if args.pbo:
        return print_pbo(pbo_table(args.results, where=args.where, symbol=args.symbol,
                                   partial=args.partial), args.json)
    if args.pareto:
        metrics = [m.strip() for m in args.pareto.split(",")]
        frame = pareto_front(args.results, metrics, where=args.where, symbol=args.symbol,
                             sample=args.sample, across=args.across, agg=args.agg,
                             partial=args.partial)
        by = metrics[0]
    else:
        frame = rank(args.results, by=args.by, top=args.top, where=args.where,
                     ascending=args.ascending, partial=args.partial, smooth=args.smooth,
                     across=args.across, agg=args.agg, symbol=args.symbol,
                     sample=args.sample, rung=args.rung)
        by = args.by
    kind = kind_of(ds)
    if kind.walk_forward:
        sample = args.sample or "train"
        print(f"barsweep: a walk-forward store: ranking every window's {sample} sample"
              + ("" if args.sample else " (--sample test for the test samples)")
              + f"; `barsweep walkforward {args.results}` chooses in each window's train "
                f"sample and chains the tests out of sample", file=sys.stderr)
    pending, total = store_status(args.results)
    if pending:
        n_done = count_computed(ds)
        n_all = ds.attrs.get("n_combos")
        bound = "" if ds.attrs.get("n_combos_exact", True) else "at most "
        of = f" of {bound}{n_all:,}" if isinstance(n_all, int) else ""
        print(f"barsweep: --partial: {pending} of {total} blocks missing; ranking the "
              f"{n_done:,}{of} combos computed so far", file=sys.stderr)
    if not len(frame):
        reason = (f"passes --where {args.where!r}" if args.where
                  else f"has a defined {by}" + (" on every symbol" if args.across else ""))
        print(f"barsweep: no combo of {args.results} to rank: none {reason}", file=sys.stderr)
        return 1
    reference = None
    if not args.json and not args.across:
        reference = buy_and_hold_or_note(ds, frame)
    if args.json:
        records = to_records(frame)
        if args.across and not args.pareto:
            records = across_records(records, args.by, args.agg)
        print(json.dumps(records, indent=1, allow_nan=False))
    elif args.pareto:
        each = (f"{args.agg} across symbols" if args.across
                else "one front per symbol" + (" and window" if kind.walk_forward else ""))
        print(f"non-dominated by {', '.join(metrics)} ({each}; {len(frame)} combos):")
        print(format_across(frame) if args.across
              else format_table(frame, metrics[0], extra=metrics[1:], reference=reference))
    elif args.across:
        print(format_across(frame))
    else:
        extra = [c for c in ("psr", "dsr", f"{by}_smooth") if c in frame.columns and c != by]
        print(format_table(frame, by, extra=extra, reference=reference))
    return 0


def buy_and_hold_or_note(ds, frame):
    """Buy and hold beside the ranked rows' symbols (windows, samples), or None and a
    ``note:`` line on stderr saying why not (no spec, bars gone or changed)."""
    from ..analysis.buyhold import buy_and_hold, groups_of

    try:
        return buy_and_hold(ds, groups_of(frame))
    except BarsweepError as err:
        print(f"barsweep: note: no buy&hold row: {err}", file=sys.stderr)
        return None


def across_records(records: list[dict], by: str, agg: str) -> list[dict]:
    """``rank --across symbol --json`` rows: the parameters, ``metric``, ``agg``, the
    aggregate as ``value`` (``smoothed`` with --smooth) and ``by_symbol``."""
    out = []
    for row in records:
        new, per_symbol = {}, {}
        for key, value in row.items():
            if key.startswith(f"{by}[") and key.endswith("]"):
                per_symbol[key[len(by) + 1:-1]] = value
            elif key == f"{by}_{agg}":
                new.update(metric=by, agg=agg, value=value)
            elif key == f"{by}_smooth_{agg}":
                new["smoothed"] = value
            else:
                new[key] = value
        new["by_symbol"] = per_symbol
        out.append(new)
    return out


def format_across(frame) -> str:
    """``rank --across``'s table: parameters, the aggregate, each symbol's value, as
    :func:`format_table` formats them."""
    from ..analysis.formatting import cells, column_metric
    from ..analysis.rank import COMPUTED

    known = {*_metric_names(), *COMPUTED}
    identity = [c for c in frame.columns if column_metric(c) not in known]
    return cells(frame, identity).to_string()


def print_pbo(table, as_json: bool) -> int:
    """``rank --pbo``: one block (or JSON object) per symbol."""
    rows = []
    for labels, res in table:
        rows.append({**labels, "pbo": res.pbo, "n_splits": res.n_splits,
                     "sampled": res.sampled, "n_combos": res.n_combos,
                     "logit_quartiles": list(res.logit_quartiles),
                     "degradation_slope": res.slope, "degradation_intercept": res.intercept})
    if as_json:
        def finite(value):
            return None if isinstance(value, float) and not math.isfinite(value) else value

        clean = [{k: [finite(q) for q in v] if k == "logit_quartiles" else finite(v)
                  for k, v in row.items()} for row in rows]
        print(json.dumps(clean, indent=1, allow_nan=False))
        return 0
    for row in rows:
        where = " ".join(f"{k}={row[k]}" for k in row if k not in _PBO_KEYS)
        how = "a seeded random sample of" if row["sampled"] else "all"
        q1, q2, q3 = row["logit_quartiles"]
        print(f"{where}: PBO {row['pbo']:.3f} over {how} {row['n_splits']:,} CSCV splits of "
              f"{row['n_combos']:,} combos; logit quartiles {q1:.3f} {q2:.3f} {q3:.3f}; "
              f"degradation slope {row['degradation_slope']:.3f} "
              f"(OOS Sharpe on IS Sharpe of the IS winner)")
    return 0


_PBO_KEYS = {"pbo", "n_splits", "sampled", "n_combos", "logit_quartiles",
             "degradation_slope", "degradation_intercept"}


def format_table(frame, by: str, extra=(), reference=None) -> str:
    """A compact table for people: identity (symbol, window, sample, the parameters as
    the grid wrote them), the ranking metric (then ``extra`` columns: psr, dsr, the
    smoothed metric), then key metrics, formatted by
    :mod:`barsweep.pipeline.analysis.formatting`; then the ``reference`` rows (buy and hold,
    :func:`barsweep.pipeline.analysis.buyhold.buy_and_hold`), unranked (``-``), ``buy&hold`` in
    the first parameter column."""
    from ..analysis.formatting import ranking_cells

    key = ["total_return", "sharpe", "max_drawdown", "n_trades", "win_rate", "exposure"]
    return ranking_cells(frame, [by, *extra, *key], reference).to_string()


def _metric_names() -> tuple[str, ...]:
    from ...engine import METRICS

    return METRICS
