"""The ``/barsweep`` page of a Dask scheduler's dashboard, live while a run goes.

:class:`SweepWatch`, a scheduler plugin, folds the run's events (topic
:data:`~barsweep.pipeline.run.watch.TOPIC`: a stage's start, each block's counts, its best
rows and heatmap cells; :mod:`barsweep.pipeline.run.watch`) into a small
:class:`RunState`; the page (:mod:`barsweep.pipeline.run.dashboard_page`) draws it twice a
second. :func:`install` puts both on a scheduler, beside its other pages and in its menu,
on the same HTTP server (its address and TLS settings). barsweep installs them on the
clusters it starts; an external scheduler takes them as a preload::

    dask scheduler --preload barsweep.pipeline.run.dashboard

The page's live updates travel over a Bokeh websocket, which a browser opens for any
web page that asks (Dask allows every origin: ``allow_websocket_origin: ['*']``): the
page's websocket, and on a cluster barsweep starts every dashboard websocket, takes
only the origins of the dashboard's own address (:func:`keep_origins`), so that another
site open in the user's browser cannot read the run.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from distributed.diagnostics.plugin import SchedulerPlugin

from .internals import (
    add_dashboard_page,
    bokeh_apps,
    http_address,
    origins_taken,
    served_paths,
)
from .order import rank_order
from .watch import PLUGIN, TOP, TOPIC

logger = logging.getLogger(__name__)

#: The plugin's name on the scheduler, and the page's path.
NAME = PLUGIN
PAGE = "barsweep"


class RunState:
    """What the page shows of one run, folded from its events.

    Attributes
    ----------
    run : str
        The run's key.
    meta : dict
        The first stage's description (``out``, ``strategy``, ``by``, ``pair``, ...).
    stages : dict
        Per rung (-1: a grid run): ``blocks``, ``done``, ``combos``, ``combos_done``.
    workers : dict
        Blocks done per worker address.
    rows, cells : dict
        Per rung: the best rows so far (best first), and the best ``by`` per heatmap
        cell ``(a, b)``.
    """

    def __init__(self, run: str, meta: dict) -> None:
        self.run, self.meta = run, meta
        self.t0 = meta.get("t", 0.0)
        self.t_last = self.t0
        self.ended = False
        self.stages: dict[int, dict] = {}
        self.workers: dict[str, int] = {}
        self.rows: dict[int, list[dict]] = {}
        self.cells: dict[int, dict[tuple[float, float], float]] = {}
        self.combo_bars = 0
        self.seen: set[tuple[int, int]] = set()
        self.rung = -1
        self.end_said = False  # the latest stage's end came (its blocks may come later)

    def stage(self, msg: dict) -> None:
        """A stage starts: its blocks and combos join the totals."""
        rung = int(msg.get("rung", -1))
        stage = self.stages.setdefault(rung, {"blocks": 0, "done": 0, "combos": 0,
                                              "combos_done": 0})
        stage["blocks"] += int(msg.get("blocks", 0))
        stage["combos"] += int(msg.get("combos", 0))
        self.rung, self.ended, self.end_said = rung, False, False

    def block(self, msg: dict) -> None:
        """A block ends: its counts, rows and cells folded in (once per block), into the
        rung it names (its event may come after the next rung's start, or after the
        end: a stage's end waits for its events a while, not for ever)."""
        rung = int(msg.get("rung", self.rung))
        key = (rung, int(msg.get("block", -1)))
        if key in self.seen:
            return
        self.seen.add(key)
        stage = self.stages.setdefault(rung, {"blocks": 0, "done": 0, "combos": 0,
                                              "combos_done": 0})
        stage["done"] += 1
        stage["combos_done"] += int(msg.get("combos", 0))
        self.combo_bars += int(msg.get("combos", 0)) * int(msg.get("bars", 0))
        worker = msg.get("worker") or "this process"
        self.workers[worker] = self.workers.get(worker, 0) + 1
        self.t_last = max(self.t_last, float(msg.get("t", self.t_last)))
        if msg.get("rows"):
            self.rows[rung] = merge_rows(self.rows.get(rung, []), msg["rows"], self.meta)
        cells = self.cells.setdefault(rung, {})
        better = min if self.meta.get("ascending") else max
        for a, b, value in msg.get("cells", ()):
            cells[(a, b)] = better(cells.get((a, b), value), value)
        if self.end_said:  # a block that came after its stage's end
            self.ended = self.complete()

    def end(self, msg: dict) -> None:
        """The latest stage ends: the run is done once every block of every stage is."""
        self.end_said = True
        self.ended = self.complete()
        self.t_last = max(self.t_last, float(msg.get("t", self.t_last)))

    def complete(self) -> bool:
        """Whether every block of every stage so far is done."""
        done, blocks, _, _ = self.totals()
        return done >= blocks

    def totals(self) -> tuple[int, int, int, int]:
        """Blocks done and planned, combos done and planned, over every stage so far."""
        s = self.stages.values()
        return (sum(x["done"] for x in s), sum(x["blocks"] for x in s),
                sum(x["combos_done"] for x in s), sum(x["combos"] for x in s))


def merge_rows(rows: list[dict], new: list[dict], meta: dict, top: int = TOP) -> list[dict]:
    """The best ``top`` of ``rows`` and ``new`` (one row per store position), in the
    order ``rank`` gives them (:func:`~barsweep.pipeline.run.order.rank_order`)."""
    by_position = {r["position"]: r for r in rows}
    by_position.update((r["position"], r) for r in new)
    candidates = [by_position[p] for p in sorted(by_position)]
    score = np.array([r.get(meta["by"], np.nan) for r in candidates], dtype=np.float64)
    order = rank_order(score, bool(meta.get("ascending")), bool(meta.get("idle_wins")),
                       np.array([r["ruined"] for r in candidates], dtype=bool),
                       np.array([r["traded"] for r in candidates], dtype=bool))
    return [candidates[i] for i in order[:top]]


class SweepWatch(SchedulerPlugin):
    """A scheduler plugin holding the latest run's :class:`RunState` (None before any),
    folded from its events; ``version`` counts the events taken."""

    name = NAME

    def __init__(self) -> None:
        self.state: RunState | None = None
        self.version = 0

    def log_event(self, topic: str, msg) -> None:
        if topic != TOPIC or not isinstance(msg, dict):
            return
        kind, run = msg.get("kind"), msg.get("run")
        if kind == "stage" and (self.state is None or self.state.run != run):
            self.state = RunState(run, msg)
        state = self.state
        if state is None or state.run != run:
            return  # an earlier run's late event
        if kind == "stage":
            state.stage(msg)
        elif kind == "block":
            state.block(msg)
        elif kind == "end":
            state.end(msg)
        self.version += 1


def install(scheduler) -> bool:
    """Put :class:`SweepWatch` and the ``/barsweep`` page on ``scheduler`` (once; run in
    its event loop): the page is served by the scheduler's own dashboard server, and
    listed in its menu. Returns whether the page is served (False: the scheduler serves
    no dashboard; the plugin still keeps the run's state)."""
    if NAME not in scheduler.plugins:
        scheduler.add_plugin(SweepWatch(), name=NAME)
    apps = bokeh_apps(scheduler)
    if not apps:
        return False
    if not any(path.rstrip("/").endswith("/" + PAGE) for app in apps
               for path in served_paths(app)):
        add_page(scheduler, apps[0].prefix)
    return True


def add_page(scheduler, prefix: str) -> None:
    """Serve the page at ``<prefix>barsweep`` from ``scheduler``'s HTTP server and list
    it in the dashboard's menu."""
    from tornado.ioloop import IOLoop

    from .dashboard_page import page_doc

    app = add_dashboard_page(scheduler, prefix, PAGE, page_doc)
    own_origins_only(app, scheduler.http_server)
    scheduler.http_application.add_application(app)
    app.initialize(IOLoop.current())
    app.start()


def installer(dask_scheduler=None, own_origins: bool = False) -> bool:
    """:func:`install` as ``Client.run_on_scheduler`` calls it; with ``own_origins``,
    :func:`keep_origins` on the scheduler too."""
    if own_origins:
        keep_origins(dask_scheduler)
    return install(dask_scheduler)


def install_on(client, say: Callable[[str], None] | None = None, *,
               own_origins_only: bool = False) -> None:
    """Install the page on ``client``'s scheduler (a cluster barsweep started, in this
    process); ``say`` hears why not, when it cannot. With ``own_origins_only`` (a
    cluster barsweep started), every dashboard websocket of the scheduler takes only
    its own origins (:func:`keep_origins`; its workers serve no Bokeh page)."""
    try:
        client.run_on_scheduler(installer, own_origins=own_origins_only)
    except Exception as exc:  # the run goes on without its page
        logger.warning("barsweep: no /barsweep dashboard page: %s", exc)
        if say is not None:
            say(f"no /barsweep dashboard page: {exc}")


#: Dask's setting for the origins its dashboards' websockets take (Bokeh's
#: ``allow_websocket_origin``; Dask's default ``['*']``: every web page).
ORIGINS_SETTING = "distributed.scheduler.dashboard.bokeh-application.allow_websocket_origin"


@contextmanager
def origins_kept_to_localhost() -> Iterator[None]:
    """While a cluster starts inside: its dashboard takes websockets from
    ``localhost:PORT`` pages only (Bokeh's default for an empty list), not Dask's every
    origin, until :func:`keep_origins` opens it to its own addresses."""
    import dask

    with dask.config.set({ORIGINS_SETTING: []}):
        yield


def keep_origins(server) -> set[str]:
    """Let every dashboard websocket of ``server`` (a Dask scheduler) take pages of
    the dashboard's own address only (:func:`own_origins`); returns them
    (empty: no dashboard)."""
    http = getattr(server, "http_server", None)
    if http is None or not getattr(http, "port", None):
        return set()
    origins = own_origins(*http_address(http))
    for app in bokeh_apps(server):
        own_origins_only(app, http, origins)
    return origins


def own_origins_only(app, http, origins: set[str] | None = None) -> None:
    """Let the Bokeh server application ``app`` take websockets from pages of the HTTP
    server ``http`` (Dask sets its ``address`` and ``port``) only: its
    ``websocket_origins``, the set Bokeh checks each websocket's ``Origin`` against
    (``host:port``), replaced in place."""
    allowed = origins_taken(app)
    allowed.clear()
    allowed.update(origins or own_origins(*http_address(http)))


#: The names a browser on this machine uses for a server bound to a loopback address.
LOOPBACK_NAMES = ("localhost", "127.0.0.1")


def own_origins(host: str, port: int) -> set[str]:
    """The ``host:port`` origins of pages a dashboard bound to ``host`` serves: the
    loopback names for a loopback address; for every address (``0.0.0.0``, ``::``),
    those, this machine's name and each of its IPv4 addresses; else ``host`` itself.

    >>> sorted(own_origins("127.0.0.1", 8787))
    ['127.0.0.1:8787', 'localhost:8787']
    >>> own_origins("10.0.0.1", 8787)
    {'10.0.0.1:8787'}
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name
        hosts = {host}
    else:
        if address.is_loopback:
            hosts = set(LOOPBACK_NAMES)
        elif address.is_unspecified:
            hosts = {*LOOPBACK_NAMES, socket.gethostname(), socket.getfqdn(),
                     *_ipv4_addresses()}
        else:
            hosts = {host}
    return {f"{name.lower()}:{port}" for name in hosts if ":" not in name}


def _ipv4_addresses() -> set[str]:
    """This machine's IPv4 addresses."""
    import psutil

    return {a.address for addresses in psutil.net_if_addrs().values() for a in addresses
            if a.family == socket.AF_INET}


def dask_setup(scheduler) -> None:
    """The preload's entry point: ``dask scheduler --preload
    barsweep.pipeline.run.dashboard`` puts the page on that scheduler."""
    if not install(scheduler):
        logger.warning("barsweep: this scheduler serves no dashboard; no /barsweep page")
