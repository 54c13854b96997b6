"""The stages every run goes through once planned: its store's attributes, its blocks
computed on the cluster with the progress line, and what it tells the one who started
it (:class:`Voice`, :class:`RunSummary`)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

import numpy as np
from distributed import Client

from ...engine import METRICS
from ...version import __version__
from .blocks import BlockReport, BlockTask
from .execute import execute, kernel_cached, warm_up
from .prepare import Prepared, compiling_line
from .progress import ProgressBar
from .shipping import BarsShipper
from .store_modules import MODULES_ATTR, modules_record
from .watch import stage_feed


@dataclasses.dataclass(frozen=True)
class Voice:
    """What a run tells the one who started it, and how.

    Attributes
    ----------
    say : callable or None
        Hears lines for people as the run goes: the bars a year the metrics are
        annualised with, the kernel compiling, the cluster (and its dashboard), the bars
        shipped, a resume's blocks already done. None: nothing is said.
    note : callable or None
        Hears what a killed run had left beside the store, cleared as the lock is taken.
    progress : bool
        The progress line on stderr (:class:`~barsweep.pipeline.run.progress.ProgressBar`).
    one_line : bool
        Stops and failures in one line, as the command line gives them: Ctrl-C or
        SIGTERM raises :class:`~barsweep.errors.Interrupted` saying what is done and the
        command that resumes; a RunError, once the store was written, ends with that
        command; Dask's logs of a lost fetch or a connection closed under a callback
        (which those lines say better) are silenced for the process. False:
        KeyboardInterrupt and RunError pass as they come, logging is left as it is.
    """

    say: Callable[[str], None] | None = None
    note: Callable[[str], None] | None = None
    progress: bool = False
    one_line: bool = False


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What a run did: its store, the combos and blocks it computed, the combo-bars its
    blocks ran, the seconds they took (planned to finished), the backend, and the
    blocks an earlier run had done (``--resume``)."""

    out: str
    n_combos: int
    n_blocks: int
    combo_bars: int
    seconds: float
    backend: str
    blocks_skipped: int = 0

    @property
    def combo_bars_per_second(self) -> float:
        return self.combo_bars / self.seconds if self.seconds > 0 else float("nan")


def run_attrs(prepared: Prepared, backend: tuple[str, str], where: tuple[str, str],
              store_id: str, ppy: float, n_combos: int, exact: bool) -> dict:
    """The attributes that say what made a store: the spec, the version, the bars'
    fingerprint, backend and cluster and why, the combos (maybe a bound until the run
    is complete), the bars a year."""
    spec = prepared.spec
    attrs = {
        "store_id": store_id,
        "spec": spec.to_yaml(),
        "spec_path": prepared.spec_path or "",
        "barsweep_version": __version__,
        "bars_fingerprint": json.dumps(prepared.bars_fingerprint),
        "backend": backend[0],
        "backend_requested": spec.run.backend,
        "backend_reason": backend[1],
        "cluster": where[0],
        "cluster_reason": where[1],
        "metrics": json.dumps(list(METRICS)),
        "n_combos": n_combos,  # exact once complete; maybe a bound until then
        "n_combos_exact": exact,
        "periods_per_year": ppy,
        "annualised": prepared.annualised,
        "strategy": spec.strategy_name,
        "rule": spec.strategy_def.doc if not isinstance(spec.strategy, str) else "",
        MODULES_ATTR: modules_record(spec.modules, spec.module_dir),
    }
    return attrs


def compute(client: Client, prepared: Prepared, tasks: tuple[BlockTask, ...],
            todo: tuple[BlockTask, ...],
            todo_combos: int, voice: Voice) -> tuple[list[BlockReport], float, list[str]]:
    """Compute the ``todo`` blocks (``todo_combos`` combos) on ``client``: the bars
    shipped to workers that cannot read them, the kernel warmed once per cluster, then
    every block, with the progress line and the dashboard page's events
    (:func:`~.watch.stage_feed`). Returns the blocks' reports, when the warm-up
    ended (``time.perf_counter``) and the workers the bars were shipped to."""
    spec, say = prepared.spec, voice.say
    shipper = BarsShipper(client, dict.fromkeys(ref for t in tasks
                                                for ref in t.account.refs))
    try:
        shipped = shipper.ensure() if todo else None
        if shipped and say is not None:
            say(shipped)
        portfolio = bool(todo) and todo[0].account.portfolio_kernel
        compiling = bool(todo) and todo[0].backend == "cpu" and not kernel_cached(
            spec.strategy_ref, portfolio)
        if compiling and say is not None:
            say(compiling_line(spec.strategy_name, portfolio))
        t_warm = time.perf_counter()
        warm_up(client, todo)
        t_plan = time.perf_counter()
        if compiling and say is not None:
            say(f"compiled in {t_plan - t_warm:.1f} s")
        bar = ProgressBar(len(todo), todo_combos, every_s=spec.run.progress_every
                          ) if voice.progress and todo else None
        feed, todo = stage_feed(client, prepared, todo, todo_combos)
        try:
            reports = execute(client, todo, feed.done(bar.update if bar else None),
                              worker_timeout=spec.run.worker_timeout,
                              on_workers=bar.workers if bar else None, ship=shipper.ensure)
            feed.end()
        finally:
            if bar:
                bar.close()
    finally:
        shipper.close()
    return reports, t_plan, sorted(shipper.shipped_to)


def phase_summary(reports: list[BlockReport]) -> dict:
    """Per phase of a block (``open_bars``, ``indicators``, ``kernel``, ``write``; the
    GPU's stages on ``cuda``): the total seconds over the blocks and the 50th, 90th and
    100th percentiles of one block's, for the report and the store's attributes."""
    phases: dict[str, list[float]] = {}
    for report in reports:
        for name, seconds in report.phases.items():
            phases.setdefault(name, []).append(seconds)
    return {name: {"total": round(float(np.sum(s)), 6),
                   **{f"p{q}": round(float(np.percentile(s, q)), 6) for q in (50, 90, 100)}}
            for name, s in phases.items()}
