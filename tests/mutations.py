"""Mutation checks, run by hand (not by pytest, not in CI): each mutation below breaks
the code the way a rebuild could, in a copy of this checkout, and the tests named beside
it must fail. A mutation whose tests still pass is a hole in the suite.

    .venv/bin/python tests/mutations.py [--only NAME ...] [--keep]

The copy is a git worktree of HEAD (committed code only) in a temporary folder, with a
copy of ``.venv`` installed editable from it, so the tests import the mutated code; each
mutation is applied, its tests run (``pytest -x -q -n 0``), and the file restored. Prints
a markdown table: mutation, tests, caught or SURVIVED, seconds. Exit status 1 when one
survived.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to the checkout
    old: str  # the text replaced: must occur exactly once
    new: str
    tests: tuple[str, ...]  # pytest node ids or files that must fail


MUTATIONS = (
    Mutation(
        "a margin call never comes",
        "engine/core/fills.py",
        "        if margin > 0.0 and (reason < 0 or margin >= level):\n",
        "        if False:\n",
        ("tests/engine/test_leverage.py::"
         "test_a_margin_call_closes_where_the_equity_is_the_maintenance_fraction",)),
    Mutation(
        "an entry order through a gap fills at its level",
        "engine/core/fills.py",
        "        if open_ <= level:\n            return open_\n        return level if low",
        "        if open_ <= level:\n            return level\n        return level if low",
        ("tests/engine/test_entry_orders.py::test_long_orders_equal_backtesting_py[None-limit]",)),
    Mutation(
        "an exit signal does not cancel a pending entry order",
        "engine/core/simulate.py",
        "                    long_exit if order_side > 0 else short_exit)):\n",
        "                    False)):\n",
        ("tests/engine/test_entry_orders.py::test_long_orders_equal_backtesting_py[None-stop]",)),
    Mutation(
        "the entry bar's stops see the bar's open, before the order filled",
        "engine/core/simulate.py",
        "                bar_open = price\n",
        "                bar_open = open_[t]\n",
        ("tests/engine/test_entry_orders.py::test_the_kernel_on_the_hand_cases",)),
    Mutation(
        "a risk size in ATRs measures its stop loss instead",
        "engine/core/fills.py",
        "        distance = atr_stop if atr_stop != 0.0 else stop_loss * fill\n",
        "        distance = stop_loss * fill\n",
        ("tests/engine/test_atr_settings.py::"
         "test_a_risk_size_in_atrs_loses_its_fraction_at_that_distance",)),
    Mutation(
        "the kernels' ATR ignores its window",
        "engine/core/inputs.py",
        "atr(bars.high, bars.low, bars.close, window)",
        "atr(bars.high, bars.low, bars.close, 14)",
        ("tests/engine/test_atr_settings.py::test_the_kernels_atr_is_talibs",)),
    Mutation(
        "leverage buys no more",
        "engine/core/fills.py",
        "    budget = cash * leverage\n",
        "    budget = cash\n",
        ("tests/engine/test_leverage.py::"
         "test_twice_the_equity_moves_twice_the_price_and_pays_interest",)),
    Mutation(
        "a percent size puts all the cash in",
        "engine/core/fills.py",
        "        budget = cash * size_value\n",
        "        budget = cash\n",
        ("tests/engine/test_sizing.py::test_a_partial_size_leaves_the_rest_in_cash",)),
    Mutation(
        "a lot does not round the size",
        "engine/core/fills.py",
        "        size = (size // lot) * lot\n",
        "        size = size\n",
        ("tests/engine/test_sizing.py::test_sized_sweep_and_backtest_equal_the_reference",)),
    Mutation(
        "bars per year: always 365 days (daily stocks annualised as 24/7)",
        "engine/core/year.py",
        "    if (n - 1) * float(step_ns) >= CONTINUOUS_COVERAGE * span:",
        "    if True:",
        ("tests/engine/test_year.py", "tests/pipeline/test_year_days.py")),
    Mutation(
        "the spec's year_days is ignored when set",
        "pipeline/run/prepare.py",
        "    if spec.data.year_days is not None:\n        ppy = periods_per_year(",
        "    if False:\n        ppy = periods_per_year(",
        ("tests/pipeline/test_year_days.py::test_the_spec_year_days_overrides",)),
    Mutation(
        "matplotlib dropped from the dependencies",
        "pyproject.toml",
        '    "matplotlib>=3.8",\n    "tqdm',
        '    "tqdm',
        ("tests/test_packaging.py::test_every_import_is_a_declared_dependency",)),
    Mutation(
        "a stop during the driver's compile is not held",
        "pipeline/run/prepare.py",
        "    with stops_held():  # numba",
        "    with contextlib.nullcontext():  # numba",
        ("tests/pipeline/test_faults.py::test_ctrl_c_while_the_kernel_compiles_is_one_line",)),
    Mutation(
        "the folders made for the lock stay after a refused run",
        "pipeline/run/lock.py",
        "            try:\n                directory.rmdir()",
        "            try:\n                continue",
        ("tests/pipeline/test_output_safety.py::test_a_refused_run_leaves_no_folder_for_its_out",)),
    Mutation(
        "a skip passes under CI=true",
        "tests/conftest.py",
        "    if report.skipped and in_ci() and not hasattr(report, \"wasxfail\"):",
        "    if False:",
        ("tests/test_ci_skips.py",)),
    Mutation(
        "the bar writer writes the final file in place (no temporary file)",
        "datasets/writer.py",
        '        feather.write_feather(table, tmp_name, compression="uncompressed", '
        'chunksize=len(table))',
        '        feather.write_feather(table, path, compression="uncompressed", '
        'chunksize=len(table))',
        ("tests/datasets/test_real_faults.py",)),
    Mutation(
        "PBO computed as if every segment had the same number of bars",
        "pipeline/analysis/robust/cscv.py",
        "    counts = np.asarray(seg_n, dtype=np.float64)\n",
        "    counts = np.asarray(seg_n, dtype=np.float64)\n    counts = np.full_like(counts, "
        "counts.mean())\n",
        ("tests/pipeline/test_robust.py::"
         "test_a_runs_pbo_on_unequal_segments_equals_a_literal_cscv_of_its_backtests",)),
    Mutation(
        "walk-forward's choice ignores ruin",
        "pipeline/analysis/stream.py",
        'best.add(score[pick], _flag(slab, "ruined", pick) == 1.0,',
        'best.add(score[pick], _flag(slab, "ruined", pick) > 9.0,',
        ("tests/pipeline/test_walkforward.py::"
         "test_walkforward_never_chooses_a_ruined_or_idle_train_combo",)),
    Mutation(
        "walk-forward's choice ignores idleness (no trades)",
        "pipeline/analysis/walkforward.py",
        "ascending or by in BEST_WHEN_IDLE, dims, names, done)",
        "False, dims, names, done)",
        ("tests/pipeline/test_walkforward.py::"
         "test_walkforward_never_chooses_a_ruined_or_idle_train_combo",)),
    Mutation(
        "an exit that its entry holds with is dropped while a position is open",
        "engine/core/fills.py",
        "            return False, held\n",
        "            return False, False\n",
        ("tests/engine/test_conflict.py::test_an_exit_fires_while_the_entry_still_holds",)),
    Mutation(
        "a cross above counts a tie on the previous bar",
        "engine/core/simulate.py",
        "    return (a_prev < b_prev) & (a > b)\n",
        "    return (a_prev <= b_prev) & (a > b)\n",
        ("tests/engine/test_vectorbt_oracle.py",)),
    Mutation(
        "EMA seeded with its first value, not the mean of the first n",
        "engine/indicators/ma.py",
        "    value = total / period\n    fill_nan(out, first)\n    out[first] = value\n",
        "    value = x[first - period + 1]\n    fill_nan(out, first)\n    out[first] = value\n",
        ("tests/engine/test_vectorbt_oracle.py",)),
    Mutation(
        "data info prints one bar fewer",
        "pipeline/cli/data.py",
        "{r.n_bars:>10,}",
        "{r.n_bars - 1:>10,}",
        ("tests/pipeline/test_cli.py::test_data_synth_then_info",)),
    Mutation(
        "the engine's source hash skips its subfolders (strategies/)",
        "engine/cache.py",
        '        subfolders[:] = sorted(d for d in subfolders if not d.startswith(("__", ".")))',
        "        subfolders[:] = []",
        ("tests/engine/test_kernel_cache.py::"
         "test_the_source_hash_covers_every_engine_file_cheaply",)),
    Mutation(
        "an entry at the close of a bar where a stop fired is dropped (vectorbt's rule)",
        "engine/core/simulate.py",
        "            if enter_side != 0 and position == 0.0:\n                entry_equity = cash",
        "            if enter_side != 0 and position == 0.0 and (exit_now or not filled):\n"
        "                entry_equity = cash",
        ("tests/engine/test_vectorbt_directions.py::test_matches_vectorbt",)),
    Mutation(
        "the close's signal is told a stopped-out position is still held",
        "engine/core/simulate.py",
        "            ind, rows, fparams, bars, t, position, entry_fill, entry_bar,\n"
        "            cash + position",
        "            ind, rows, fparams, bars, t, position if not filled else 1.0, entry_fill,"
        " entry_bar,\n            cash + position",
        ("tests/engine/test_signal_state.py",)),
    Mutation(
        "the held stretch's signal gets the bar after the entry as its entry bar",
        "engine/core/simulate.py",
        "                    ind, rows, fparams, bars, t, position, entry_fill, entry_bar,\n"
        "                    position * price",
        "                    ind, rows, fparams, bars, t, position, entry_fill, entry_bar + 1,\n"
        "                    position * price",
        ("tests/engine/test_signal_state.py",)),
    Mutation(
        "the run imports an analysis (an import that runs back up the rooms)",
        "pipeline/run/prepare.py",
        "from .results import check_out, store_attrs\n",
        "from .results import check_out, store_attrs\nfrom ..analysis import rank  # noqa: F401\n",
        ("tests/test_layers.py",)),
    Mutation(
        "a resumed run's blocks write no PBO segment sums",
        "pipeline/run/orchestrate.py",
        "    todo = tuple(t for t in the_plan.tasks if done[t.block_id] == PENDING)",
        "    todo = tuple(__import__('dataclasses').replace(t, segments=0) for t in "
        "the_plan.tasks if done[t.block_id] == PENDING)",
        ("tests/pipeline/test_faults.py::"
         "test_driver_sigkilled_then_resumed_equals_an_undisturbed_run",)),
    Mutation(
        "a reader does not look for the chunks a computed block wrote",
        "pipeline/run/integrity.py",
        "            if key not in present[name]:",
        "            if False:",
        ("tests/pipeline/test_store_integrity.py::"
         "test_a_deleted_chunk_is_refused_and_resume_recomputes_its_block",)),
    Mutation(
        "a reader trusts array metadata that parses (a checksum codec dropped, a shape edited)",
        "pipeline/run/integrity.py",
        "    problems = [Problem(what) for what in odd_arrays(path, index)]",
        "    problems = []",
        ("tests/pipeline/test_store_integrity.py::test_edited_array_metadata_is_refused",)),
    Mutation(
        "a halving rung's warm-up leaves out the rule's lags",
        "pipeline/run/prepare.py",
        "    warm = warm_up(strategy, largest, n_bars) + lookback(strategy, largest)",
        "    warm = warm_up(strategy, largest, n_bars)",
        ("tests/pipeline/test_search_limits.py::"
         "test_a_rules_lags_count_in_the_first_rungs_warm_up",)),
    Mutation(
        "a threads cluster's worker serves HTTP on every interface",
        "pipeline/run/cluster.py",
        "processes=False, worker_class=LoopbackWorker,",
        "processes=False,",
        ("tests/pipeline/test_small_runs.py::"
         "test_a_threads_run_without_a_dashboard_binds_nothing_but_loopback",)),
    Mutation(
        "--resume trusts the done flags of blocks whose chunks are damaged",
        "pipeline/run/integrity.py",
        "    problems += damaged(path, index, flags)",
        "    problems += []",
        ("tests/pipeline/test_store_integrity.py::"
         "test_a_chunk_with_flipped_bytes_is_refused_and_resume_recomputes_it",)),
    Mutation(
        "halving promotes the worst of each rung",
        "pipeline/run/search.py",
        "        reach[lane, candidates[order[:size]]] = rung",
        "        reach[lane, candidates[order[::-1][:size]]] = rung",
        ("tests/pipeline/test_search.py::"
         "test_promotion_keeps_the_best_of_each_symbol_as_rank_orders_them",)),
    Mutation(
        "a search block writes its whole region over the earlier rungs' cells",
        "pipeline/run/results.py",
        "        if cells is not None and len(cells) < array.shape[-1]:",
        "        if False:",
        ("tests/pipeline/test_search.py::test_the_last_rung_equals_the_grid_bit_for_bit",)),
    Mutation(
        "a rule's past value before the first bar wraps to the last bars",
        "engine/rules/runtime.py",
        "    return series[i] if i >= 0 else nan",
        "    return series[i]",
        ("tests/engine/test_rules_reference.py",)),
    Mutation(
        "bars_held counts the fill bar",
        "engine/rules/runtime.py",
        "    return t - entry_bar if position != 0.0 else 0",
        "    return t - entry_bar + 1 if position != 0.0 else 0",
        ("tests/engine/test_rules_reference.py",)),
    Mutation(
        "a lag inside an indicator's series is off by one",
        "engine/rules/lower.py",
        "        out[k:] = series[: len(series) - k]",
        "        out[k:] = series[1: len(series) - k + 1]",
        ("tests/engine/test_rules_language.py",)),
    Mutation(
        "a rule's != is true where a value is NaN",
        "engine/rules/runtime.py",
        "    return a < b or a > b",
        "    return a != b",
        ("tests/engine/test_rules_reference.py",)),
    Mutation(
        "an output file replaces whatever is at its path",
        "pipeline/analysis/outputs.py",
        "    if not kind.recognise(head):",
        "    if False:",
        ("tests/pipeline/test_output_files.py::test_outputs_refuse_what_is_not_theirs",)),
    Mutation(
        "a local cluster speaks plain TCP unless asked for TLS",
        "pipeline/run/cluster.py",
        '        if cluster.kind == "threads" or not cluster.encrypted_here:',
        "        if True:",
        ("tests/pipeline/test_local_tls.py::test_a_local_cluster_refuses_clients_without_its_key",)),
    Mutation(
        "the dashboard's websockets take every origin beside their own",
        "pipeline/run/dashboard.py",
        "    allowed.clear()\n",
        "    allowed.add('*')\n",
        ("tests/pipeline/test_local_tls.py::test_dashboard_websockets_take_their_own_origin_only",)),
    Mutation(
        "a search store's DSR takes V over every rung's Sharpe ratios (mixed bar counts)",
        "pipeline/analysis/stream.py",
        "            _add_moments(np.where(rung == r, sr, np.nan), params, n[at + (r,)],",
        "            _add_moments(sr, params, n[at + (r,)],",
        ("tests/pipeline/test_search_dsr.py",)),
    Mutation(
        "a run ruined on its first bar divides its drawdown by a peak of 0",
        "engine/core/metrics.py",
        "    if peak == 0.0:\n        return -1.0, float(n_bars)\n",
        "",
        ("tests/engine/test_ruin.py::test_a_window_ruined_on_its_first_bar",)),
    Mutation(
        "a generated kernel module is imported with numba's cache folder as numba reset it",
        "engine/strategies/kernels.py",
        "    point_numba()\n    spec = importlib.util.spec_from_file_location(name, path)",
        "    spec = importlib.util.spec_from_file_location(name, path)",
        ("tests/engine/test_cache_folder.py::"
         "test_importing_the_engine_leaves_the_environment_alone",)),
    Mutation(
        "a portfolio's short pays no borrow fee",
        "engine/portfolio/sim.py",
        "            paid = -size * px[1, i, t] * borrow\n",
        "            paid = 0.0 * borrow\n",
        ("tests/engine/test_portfolio_account.py::test_hand_computed_shorts_with_borrowing",),
    ),
    Mutation(
        "a portfolio's buying power ignores its shorts' exposure",
        "engine/portfolio/orders.py",
        "power += (leverage * size - abs(size)) * px[column, i, t]",
        "power += (leverage * size - size) * px[column, i, t]",
        ("tests/engine/test_portfolio_account.py::test_kernel_equals_the_reference",),
    ),
    Mutation(
        "a portfolio's margin call never comes",
        "engine/portfolio/sim.py",
        "if equity <= 0.0 or equity >= maintenance * gross:",
        "if equity <= 0.0 or equity >= 0.0 * gross:",
        ("tests/engine/test_portfolio_account.py::test_hand_computed_leverage_and_margin_call",),
    ),
    Mutation(
        "a portfolio's short trails its stop from the wrong extreme",
        "engine/portfolio/sim.py",
        "elif side < 0.0 and low < state[i, S_EXTREME]:",
        "elif side < 0.0 and low > state[i, S_EXTREME]:",
        ("tests/engine/test_portfolio_account.py::test_kernel_equals_the_reference",),
    ),
    Mutation(
        "a rule sees an order on its last bar as still pending",
        "engine/core/simulate.py",
        "float(order_side) if t < order_end else 0.0,",
        "float(order_side) if t <= order_end else 0.0,",
        ("tests/engine/test_account_state.py::test_an_order_on_its_last_bar_is_not_pending",),
    ),
    Mutation(
        "a portfolio's rules see the cash for the equity",
        "engine/portfolio/sim.py",
        "        equity = cash + value\n",
        "        equity = cash + 0.0 * value\n",
        ("tests/engine/test_portfolio_account.py::test_kernel_equals_the_reference",),
    ),
    Mutation(
        "a rule's pending_price reads the entry price",
        "engine/rules/lower.py",
        '"pending_price": "price(pending, pending_price)"',
        '"pending_price": "price(pending, entry_price)"',
        ("tests/engine/test_account_state.py::test_pending_price_is_the_order_level",),
    ),
    Mutation(
        "the calendar's weekdays start on the wrong day",
        "engine/core/calendar.py",
        "_EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday",
        "_EPOCH_WEEKDAY = 4  # 1970-01-01 was a Thursday",
        ("tests/engine/test_calendar.py::test_the_calendar_is_pandas_across_centuries_leap_"
         "days_and_the_epoch",),
    ),
    Mutation(
        "the calendar's hours truncate toward zero before the epoch",
        "engine/core/calendar.py",
        "    minutes = time_ns // _MINUTE_NS  # floor: times before the epoch too",
        "    minutes = (time_ns / _MINUTE_NS).astype(np.int64)",
        ("tests/engine/test_calendar.py::test_the_calendar_is_pandas_across_centuries_leap_"
         "days_and_the_epoch",),
    ),
)


def sh(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, **kwargs)


def make_copy(where: Path) -> Path:
    copy = where / "checkout"
    done = sh("git", "worktree", "add", "--detach", str(copy), "HEAD", cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"git worktree add failed: {done.stderr.strip()}")
    shutil.copytree(ROOT / ".venv", copy / ".venv", symlinks=True)
    done = sh(str(copy / ".venv/bin/python"), "-m", "pip", "install", "-q", "--no-deps",
              "-e", ".", cwd=copy)
    if done.returncode != 0:
        raise SystemExit(f"pip install -e of the copy failed: {done.stderr.strip()}")
    return copy


def run_one(copy: Path, mutation: Mutation) -> tuple[str, float]:
    target = copy / mutation.path
    text = target.read_text()
    if text.count(mutation.old) != 1:
        return f"NOT APPLIED ({text.count(mutation.old)} matches)", 0.0
    target.write_text(text.replace(mutation.old, mutation.new))
    t0 = time.monotonic()
    try:
        done = sh(str(copy / ".venv/bin/python"), "-m", "pytest", "-x", "-q", "-n", "0",
                  "-p", "no:cacheprovider", *mutation.tests, cwd=copy, timeout=1800)
    finally:
        target.write_text(text)
    seconds = time.monotonic() - t0
    if done.returncode == 0:
        return "SURVIVED", seconds
    if done.returncode in (1,):
        return "caught", seconds
    return f"error (pytest exit {done.returncode})", seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="WORD",
                        help="run the mutations whose name holds one of these words")
    parser.add_argument("--keep", action="store_true", help="keep the copy (its path is "
                        "printed)")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS
              if not args.only or any(w in m.name for w in args.only)]
    where = Path(tempfile.mkdtemp(prefix="barsweep-mutations-"))
    copy = make_copy(where)
    rows, survived = [], 0
    try:
        for mutation in chosen:
            verdict, seconds = run_one(copy, mutation)
            survived += verdict != "caught"
            rows.append(f"| {mutation.name} | `{mutation.path}` | "
                        f"{', '.join(f'`{t}`' for t in mutation.tests)} | {verdict} | "
                        f"{seconds:.0f} s |")
            print(rows[-1], flush=True)
    finally:
        if not args.keep:
            sh("git", "worktree", "remove", "--force", str(copy), cwd=ROOT)
            shutil.rmtree(where, ignore_errors=True)
        else:
            print(f"copy kept in {copy}", file=sys.stderr)
    print("\n| mutation | file | tests | result | time |\n|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
