"""A search run on a cluster (:mod:`.search`): its store made or resumed, its rungs
computed in turn, the store finished; what :func:`~.orchestrate.execute_run` does for
a spec whose ``search.method`` is not ``grid``."""

from __future__ import annotations

import time
import uuid

import psutil
from distributed import Client

from .estimate import search_size_line
from .execute import resolve_backend, wait_for_workers
from .memory import worker_budget
from .prepare import Prepared
from .results import ResultsError, create_store, finish_store, store_attrs
from .search import plan_search, run_rungs, rung_tasks, search_attrs, store_layout
from .stages import RunSummary, Voice, compute, phase_summary, run_attrs


def execute_search(prepared: Prepared, client: Client, where: tuple[str, str],
                   voice: Voice) -> RunSummary:
    """Draw the search's combos, create its store (or take the one it resumes), run
    its rungs and mark the store complete. The caller holds the store's lock."""
    from ...datasets import periods_per_year

    t0 = time.perf_counter()
    spec, out = prepared.spec, prepared.out
    wait_for_workers(client, spec.run.worker_timeout)
    backend = resolve_backend(spec.run.backend, client)
    kind = prepared.kind
    backend = kind.accounts.backend(backend, len(spec.data.symbols))
    lanes = prepared.account_bars  # each symbol's bars, or a portfolio's one account's
    workers = list(client.scheduler_info(n_workers=-1).get("workers", {}).values())
    n_threads = max(1, sum(w.get("nthreads", 1) for w in workers))
    resumed = prepared.resume_chunks is not None
    earlier = (store_attrs(out) or {}) if resumed else {}
    if resumed and earlier.get("backend") and earlier["backend"] != backend[0]:
        raise ResultsError(f"--resume: {out} was computed on {earlier['backend']}, this run "
                           f"would use {backend[0]} ({backend[1]}); pass --backend "
                           f"{earlier['backend']}")
    budget = None if resumed else (spec.run.memory_per_block
                                   or worker_budget(workers, psutil.virtual_memory().total))
    ppy = periods_per_year(spec.data.timeframe, spec.data.year_days)
    plan = plan_search(spec, lanes, n_threads, budget, ppy,
                       earlier.get("store_id") or uuid.uuid4().hex,
                       prepared.resume_chunks[0] if resumed else None, prepared.windows)
    if voice.say is not None:
        voice.say(f"{spec.search.method} search: {len(plan.positions):,} of the grid's "
                  f"{prepared.grid.size:,} combos drawn (seed {spec.search.seed})"
                  + ("" if plan.windows is None else
                     f", searched in each of {plan.n_windows:,} walk-forward windows")
                  + "; " + search_size_line(spec, lanes, n_threads, plan.windows))
    if not resumed:
        layout = store_layout(plan)
        symbols, members, attrs = kind.accounts.store_symbols(spec.data.symbols, {
            **run_attrs(prepared, backend, where, plan.store_id, ppy, len(plan.positions),
                        True), **search_attrs(spec, plan)})
        create_store(out, symbols, layout["axes"], layout["chunks"], plan.n_blocks,
                     attrs, segments=plan.segments, extra=layout["extra"], members=members,
                     driver_vars=layout["driver_vars"], lead=layout["lead"],
                     coords={**kind.store_coords(prepared.symbol_bars, plan.segments),
                             **layout["coords"]})
    modules = tuple(spec.modules)
    run_id = uuid.uuid4().hex[:12]
    t_plan = [None]

    def tasks_of(rung, reach):
        return rung_tasks(plan, spec, out, rung, reach, backend[0],
                          prepared.bars_fingerprint, run_id, modules)

    def compute_rung(rung, todo):
        reports, started, _ = compute(client, prepared, tuple(todo), tuple(todo),
                                      sum(len(t.cells) for t in todo), voice)
        t_plan[0] = t_plan[0] or started
        return reports

    promoted = int((store_attrs(out) or {}).get("promoted", 0))
    reports = run_rungs(plan, spec, out, promoted, compute_rung, tasks_of, voice.say)
    t_done = time.perf_counter()
    t_start = t_plan[0] or t_done
    finish_store(out, {"timings_s": {"plan_and_create": round(t_start - t0, 4),
                                     "compute_and_write": round(t_done - t_start, 4),
                                     "task_seconds_sum": round(sum(r.seconds for r in reports), 4),
                                     "total": round(t_done - t0, 4)},
                       "block_phases_s": phase_summary(reports), "n_combos": len(plan.positions)})
    return RunSummary(out, len(plan.positions) * plan.n_symbols, len(reports),
                      sum(r.n_combos * r.n_bars for r in reports), t_done - t_start,
                      backend[0], 0)
