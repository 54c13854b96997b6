"""One run, from a spec to a complete results store: the sequence that ``barsweep run``,
``barsweep demo`` and :func:`barsweep.sweep` all go through.

:func:`run_spec` locks the output (:func:`~barsweep.pipeline.run.lock.out_lock`),
prepares the run on the driver (:func:`~barsweep.pipeline.run.prepare.prepare_run`),
finds its client (:func:`run_client`: a client given, or one of the cluster
:func:`cluster_client` chooses and starts), plans its blocks
(:func:`~barsweep.pipeline.run.plan.plan`), creates or resumes the store, executes the
blocks (:func:`~barsweep.pipeline.run.execute.execute`), finishes the store
(attributes, timings) and unlocks. What differs between its callers is what the run
tells them and how: a :class:`Voice`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator

import distributed
import psutil
from distributed import Client

from ...errors import BarsweepError, Interrupted, ResultsError, RunError, Terminated
from ..config.cluster import ClusterSpec
from ..config.model import Spec
from .blocks import BlockTask
from .execute import resolve_backend, shipped_modules, wait_for_workers
from .integrity import reopen_broken
from .internals import logging_disabled_level
from .kinds import Drawn, GridCombos
from .lock import leftovers, out_lock, refuse_locked
from .memory import worker_budget
from .plan import Plan, auto_block_size, plan
from .prepare import Prepared, prepare_run
from .results import (
    PENDING,
    block_tally,
    check_out,
    create_store,
    done_flags,
    finish_store,
    resume_hint,
    store_attrs,
    unconsolidate,
    wait_removals,
)
from .search_run import execute_search
from .stages import RunSummary, Voice, compute, phase_summary, run_attrs

#: A run that tells nothing.
QUIET = Voice()


def run_spec(spec: Spec, *, out: str | None = None, overwrite: bool = False,
             resume: bool = False, spec_path: str | None = None,
             client: Client | None = None, cluster: tuple[str, str] | None = None,
             n_workers: int | None = None, voice: Voice = QUIET,
             perf_report: str | None = None, dashboard: bool = False) -> RunSummary:
    """Run ``spec`` into its results store and return what was done.

    A run already writing the store at ``out`` (default ``spec.run.out``) refuses this
    one at once; else the store is locked before anything is read, and hidden
    directories that a killed run left beside it are cleared (``voice.note`` hears
    what was done). Then the run is prepared and checked on the driver, placed on
    ``client``, or on a cluster chosen for its work and started (``spec.cluster``,
    ``n_workers`` or ``spec.n_workers`` workers; :func:`cluster_client`), and its blocks are
    computed into a new store, or into the earlier one it continues (``resume``);
    ``overwrite`` replaces an earlier store.

    Parameters
    ----------
    spec : Spec
    out : str, optional
        The results store; ``spec.run.out`` by default.
    overwrite, resume : bool
        Replace an earlier results store at ``out``, or compute its missing blocks.
    spec_path : str, optional
        The spec's file, kept in the store's attributes (the resume command names it).
    client : distributed.Client, optional
        Run on this client; ``cluster`` then says what it is and why (the store's
        ``cluster`` and ``cluster_reason``), by default its scheduler's address and
        "a client given".
    n_workers : int, optional
        Workers of a cluster started here.
    voice : Voice
        What the run tells, and how; by default nothing.
    perf_report : str, optional
        A path for Dask's performance report of the run (HTML).
    dashboard : bool
        A ``threads`` cluster started here serves a dashboard too (on 127.0.0.1), with
        its ``/barsweep`` page.
    """
    out = os.path.abspath(out or spec.run.out)
    refuse_early(out, overwrite=overwrite, resume=resume)
    # the attributes of an earlier store that --overwrite will replace: read again under
    # the lock, and here for a stop while it is taken
    earlier = store_attrs(out)
    disabled = logging_disabled_level()
    try:
        with out_lock(out) as cleared:
            for line in cleared:
                if voice.note is not None:
                    voice.note(line)
            earlier = store_attrs(out)
            try:
                return _run_locked(spec, out, earlier, overwrite=overwrite, resume=resume,
                                   spec_path=spec_path, client=client, cluster=cluster,
                                   n_workers=n_workers, voice=voice,
                                   perf_report=perf_report, dashboard=dashboard)
            finally:  # the store it replaced is gone before the lock is released
                wait_removals()
    except KeyboardInterrupt as exc:
        logging.disable(disabled)
        if not voice.one_line:
            raise
        raise Interrupted(interrupted_message(out, earlier, resume),
                          terminated=isinstance(exc, Terminated)) from None


def refuse_early(out: str, *, overwrite: bool, resume: bool) -> None:
    """Refuse a run on ``out`` before its bars are read or a cluster starts: one that
    another run holds (:func:`~barsweep.pipeline.run.lock.refuse_locked`), or that
    :func:`~barsweep.pipeline.run.results.check_out` refuses, unless a killed run left
    directories beside it (cleared under the lock, then ``out`` is checked again)."""
    refuse_locked(out)
    try:
        check_out(out, overwrite=overwrite, resume=resume)
    except BarsweepError:
        if not leftovers(out):
            raise


def _run_locked(spec: Spec, out: str, earlier: dict | None, *, overwrite: bool,
                resume: bool, spec_path: str | None, client: Client | None,
                cluster: tuple[str, str] | None, n_workers: int | None, voice: Voice,
                perf_report: str | None, dashboard: bool = False) -> RunSummary:
    """:func:`run_spec` once ``out`` is locked; ``earlier``: the attributes of the store
    at ``out`` before the run, if any."""
    if voice.one_line:
        quiet_client_logs()
    try:
        prepared = prepare_run(spec, out=out, resume=resume, overwrite=overwrite,
                               spec_path=spec_path, say=voice.say)
        with run_client(prepared, client, cluster, n_workers, dashboard) as (client, where):
            if voice.say is not None:
                voice.say(where_line(client, where, dashboard))
            try:
                with performance_report(perf_report), shipped_modules(client, prepared.spec):
                    return execute_run(prepared, client, where, voice)
            except KeyboardInterrupt:
                # the cluster's shutdown under Ctrl-C logs lost fetches and slow workers:
                # not news; the caller says what is done
                logging.disable(logging.ERROR)
                raise
    except RunError as err:
        attrs = store_attrs(out)
        if not voice.one_line or attrs is None or (attrs == earlier and not resume):
            raise
        raise RunError(f"{err}; the store is incomplete: resume with "
                       f"`{resume_hint(out, attrs)}`") from None


@contextlib.contextmanager
def cluster_client(cluster: ClusterSpec, combo_bars: float, backend: str,
          n_workers: int | None = None,
          dashboard: bool = False) -> Iterator[tuple[Client, tuple[str, str]]]:
    """A client of the cluster :func:`~barsweep.pipeline.run.cluster.choose` picks for
    ``cluster`` and a run of ``combo_bars`` on ``backend``, started or reached by
    :func:`~barsweep.pipeline.run.cluster.connect` (``n_workers`` workers of a cluster
    started here; ``dashboard``: a threads one serves one too), with what it is and
    why: ``(client, (kind, reason))``. The cluster
    is closed on exit."""
    from .cluster import choose, connect  # looked up at each call: tests stand in for it

    chosen, reason = choose(cluster, combo_bars, backend)
    with connect(chosen, n_workers, dashboard) as client:
        yield client, (chosen.describe(), reason)


@contextlib.contextmanager
def run_client(prepared: Prepared, client: Client | None, cluster: tuple[str, str] | None,
           n_workers: int | None,
           dashboard: bool = False) -> Iterator[tuple[Client, tuple[str, str]]]:
    """Where a prepared run goes: ``client`` as given (``cluster`` says what it is,
    else its scheduler's address and "a client given"), or a cluster :func:`cluster_client`
    chooses for the run's work and starts."""
    if client is not None:
        yield client, cluster or (client.scheduler.address, "a client given")
        return
    spec = prepared.spec
    with cluster_client(spec.cluster, prepared.combo_bars(), spec.run.backend,
               n_workers or spec.n_workers, dashboard) as found:
        yield found


def where_line(client: Client, where: tuple[str, str], dashboard: bool = False) -> str:
    """The line that says where a run goes: a threads cluster and why (its dashboard
    too with ``dashboard``), or the dashboard's address and the run's page there."""
    link = dashboard_link(client, where) if dashboard or where[0] != "threads" else None
    if link is None:
        return f"{where[1]}; no dashboard (--dashboard serves one)"
    return f"dask dashboard: {link} (this run: {link.rsplit('/', 1)[0]}/barsweep)"


def dashboard_link(client: Client, where: tuple[str, str]) -> str | None:
    """The dashboard's address (None: there is none): Dask's link, but for a threads
    cluster, whose dashboard listens on 127.0.0.1 where Dask's link names this
    machine's address."""
    if where[0] != "threads":
        return client.dashboard_link
    port = client.scheduler_info(n_workers=0).get("services", {}).get("dashboard")
    return None if port is None else f"http://127.0.0.1:{port}/status"


def performance_report(path: str | None) -> contextlib.AbstractContextManager:
    """Dask's performance report of what runs in the context, written to ``path``
    (HTML) on exit; nothing without a path."""
    if path is None:
        return contextlib.nullcontext()
    return distributed.performance_report(os.path.abspath(path))


def execute_run(prepared: Prepared, client: Client, where: tuple[str, str],
                voice: Voice) -> RunSummary:
    """Plan the prepared run for ``client``'s workers, create its store (or take the
    earlier one it resumes), compute every pending block and mark the store complete,
    with its timings. The caller holds the store's lock."""
    if prepared.resume_chunks is not None:
        unconsolidate(prepared.out)  # consolidated again as the run finishes
        broken = reopen_broken(prepared.out)
        if broken and voice.say is not None:
            voice.say(f"{len(broken)} block(s) of {prepared.out} have missing or damaged "
                      f"chunks (first ids: {broken[:5]}): computing them again")
    return EXECUTORS[type(prepared.kind.combos)](prepared, client, where, voice)


def execute_grid(prepared: Prepared, client: Client, where: tuple[str, str],
                 voice: Voice) -> RunSummary:
    """Plan a grid's blocks, create its store (or take the one it resumes), compute
    every pending block and mark the store complete, with its timings."""
    t0 = time.perf_counter()
    spec = prepared.spec
    wait_for_workers(client, spec.run.worker_timeout)
    backend = prepared.kind.accounts.backend(resolve_backend(spec.run.backend, client),
                                             len(spec.data.symbols))
    the_plan = plan_run(prepared, client, backend)
    if voice.say is not None:
        voice.say(plan_size_line(prepared, the_plan, client))
    if prepared.resume_chunks is not None:
        todo = resumed_blocks(prepared, the_plan, voice.say)
    else:
        create_run_store(prepared, the_plan, backend, where)
        todo = the_plan.tasks
    skipped = len(the_plan.tasks) - len(todo)
    combos_of = dict(zip((t.block_id for t in the_plan.tasks), the_plan.task_combos))
    todo_ids = {t.block_id for t in todo}
    reports, t_plan, shipped_to = compute(client, prepared, the_plan.tasks, todo,
                                          sum(combos_of[b] for b in todo_ids), voice)
    t_done = time.perf_counter()
    n_combos = sum(r.n_combos for r in reports) + sum(  # exact: the plan's may be a bound
        c for b, c in combos_of.items() if b not in todo_ids)
    finish_store(prepared.out, {"timings_s": {
        "plan_and_create": round(t_plan - t0, 4),
        "compute_and_write": round(t_done - t_plan, 4),
        "task_seconds_sum": round(sum(r.seconds for r in reports), 4),
        "total": round(t_done - t0, 4),
    }, "block_phases_s": phase_summary(reports), "blocks_resumed": skipped, "n_combos": n_combos,
        "bars_shipped_to": shipped_to,
        "blocks_written_by_driver": sum(r.written_by_driver for r in reports),
        "n_combos_exact": the_plan.n_combos_exact or not skipped})
    combo_bars = sum(r.n_combos * r.n_bars for r in reports)
    return RunSummary(prepared.out, n_combos, len(the_plan.tasks), combo_bars,
                      t_done - t_plan, backend[0], skipped)


#: Who runs a kind's combos: a grid's blocks, or a search's rungs (:mod:`.search_run`).
EXECUTORS = {GridCombos: execute_grid, Drawn: execute_search}


def plan_size_line(prepared: Prepared, the_plan: Plan, client: Client) -> str:
    """The run's combos, its store's size on disk and its time on ``client``'s worker
    threads (:func:`~barsweep.pipeline.run.estimate.size_line`)."""
    workers = client.scheduler_info(n_workers=-1).get("workers", {}).values()
    n_threads = max(1, sum(w.get("nthreads", 1) for w in workers))
    return prepared.size_line(the_plan.segments, n_threads)


def plan_run(prepared: Prepared, client: Client, backend: tuple[str, str]) -> Plan:
    """The blocks of the prepared run on ``backend`` (``(name, reason)``): as big as
    the store it resumes has them (on the backend that store was computed on), else
    ``run.block_size``, ``auto`` sized to ``client``'s worker threads."""
    spec, out = prepared.spec, prepared.out
    budget = None  # a store resumed keeps its chunks
    if prepared.resume_chunks is not None:
        block_size = math.prod(prepared.resume_chunks)
        stored = (store_attrs(out) or {}).get("backend")
        if stored and stored != backend[0]:
            raise ResultsError(f"--resume: {out} was computed on {stored}, this run would use "
                               f"{backend[0]} ({backend[1]}); pass --backend {stored}")
    else:
        block_size = spec.run.block_size
        workers = list(client.scheduler_info(n_workers=-1).get("workers", {}).values())
        if block_size == "auto":
            n_workers = max(1, sum(w.get("nthreads", 1) for w in workers))  # threads
            block_size = auto_block_size(prepared.valid_combos, prepared.n_bars, n_workers)
        budget = spec.run.memory_per_block or worker_budget(
            workers, psutil.virtual_memory().total)
    run_id = uuid.uuid4().hex[:12]
    store_id = ((store_attrs(out) or {}).get("store_id", "") if prepared.resume_chunks
                is not None else uuid.uuid4().hex)
    return plan(spec, out, block_size, prepared.grid, backend[0], prepared.bars_fingerprint, run_id,
                store_id, prepared.windows, prepared.n_bars, budget, prepared.resume_chunks)


def resumed_blocks(prepared: Prepared, the_plan: Plan,
                   say: Callable[[str], None] | None) -> tuple[BlockTask, ...]:
    """The tasks of blocks the store being resumed still lacks (its flags read under
    the lock: no other run writes them now); ``say`` hears how many are done."""
    out = prepared.out
    if the_plan.chunks != prepared.resume_chunks:  # pragma: no cover - a planning bug
        raise ResultsError(f"--resume: {out} has blocks of {prepared.resume_chunks}, "
                           f"this run plans {the_plan.chunks}")
    done = done_flags(out)
    if len(done) != the_plan.n_blocks:  # a store whose blocks are cut otherwise
        raise ResultsError(f"--resume: {out} has {len(done)} blocks, this run plans "
                           f"{the_plan.n_blocks}; use --overwrite to start again")
    todo = tuple(t for t in the_plan.tasks if done[t.block_id] == PENDING)
    if say is not None:
        say(f"resuming {out}: {len(the_plan.tasks) - len(todo)} of {len(the_plan.tasks)} "
            f"blocks already done, {len(todo)} to compute")
    return todo


def create_run_store(prepared: Prepared, the_plan: Plan, backend: tuple[str, str],
                     where: tuple[str, str]) -> None:
    """Make the run's results store: its dims and coordinates from the plan, every
    block pending but those the constraints exclude, and the attributes that say what
    made it (:func:`~.stages.run_attrs`)."""
    kind = prepared.kind
    symbols, members, attrs = kind.accounts.store_symbols(
        prepared.spec.data.symbols, run_attrs(prepared, backend, where, the_plan.store_id,
                                              the_plan.ppy, the_plan.n_combos,
                                              the_plan.n_combos_exact))
    create_store(prepared.out, symbols, the_plan.grid.axes, the_plan.chunks,
                 the_plan.n_blocks, attrs, excluded=the_plan.excluded, members=members,
                 segments=the_plan.segments, lead=the_plan.lead,
                 coords=kind.store_coords(prepared.symbol_bars, the_plan.segments),
                 remove_later=True)


def interrupted_message(out: str, earlier: dict | None = None, resume: bool = False) -> str:
    """What an interrupted run leaves: blocks done, and the command that resumes it
    (``earlier``: the attributes of the store at ``out`` before the run, if any)."""
    attrs = store_attrs(out)
    if attrs is None:
        return f"stopped before the run began; nothing was written to {out}"
    if attrs == earlier and not resume:
        return f"stopped before the run began; the earlier results in {out} are unchanged"
    computed, pending, excluded = block_tally(out)
    more = f"; {excluded} more are excluded by the constraints" if excluded else ""
    return (f"{computed} of {computed + pending} blocks computed in {out}{more}; "
            f"resume with `{resume_hint(out, attrs)}`")


def quiet_client_logs() -> None:
    """Leave to the run's one line what Dask's client logs of it: a block's report lost
    with its worker (fetched again), and a result fetched as Ctrl-C closes the client
    (tornado logs that failed callback with a traceback). Set after distributed's
    import, which sets its loggers' levels from its configuration."""
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    logging.getLogger("tornado.application").addFilter(not_a_closed_comm)
    logging.getLogger("asyncio").addFilter(not_a_lost_timeout)
    from .cluster import quiet_memory_logs

    quiet_memory_logs()  # a threads worker's, and the nannies' of a local cluster


def not_a_lost_timeout(record: logging.LogRecord) -> bool:
    """A logging filter: False for asyncio's "Future exception was never retrieved" of a
    timeout or a closed connection, which a client's connections left waiting as the
    client closed (tornado's ``with_timeout`` under distributed's batched sends) log when
    they are collected, after the run's line was said."""
    from distributed.comm.core import CommClosedError

    exc = record.exc_info[1] if record.exc_info else None
    lost = isinstance(exc, (TimeoutError, CommClosedError))
    return not (lost and record.getMessage().startswith("Future exception was never"))


def not_a_closed_comm(record: logging.LogRecord) -> bool:
    """A logging filter: False for records of a connection closed under a callback."""
    from distributed.comm.core import CommClosedError

    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, CommClosedError)
