"""Other people's internals, in one room.

Every use barsweep makes of something a dependency does not promise (a private
attribute of distributed or Bokeh, an object distributed keeps in a module it does not
export, a detail of CPython or of the standard library) is a function here, and
``tests/pipeline/test_internals.py`` has a test per function that fails, naming it,
when a release changes what it relies on. Nothing else in barsweep reaches into them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable

__all__ = ["add_dashboard_page", "bokeh_apps", "bokeh_page_look", "clear_unhandled_interrupt",
           "gc_diagnosis_off", "http_address", "logging_disabled_level", "origins_taken",
           "served_paths", "start_resource_tracker", "task_key"]


def task_key() -> object | None:
    """The key of the Dask task running this code in a worker's thread (None outside
    one): distributed keeps it in ``distributed.worker.thread_state.key``."""
    from distributed.worker import thread_state

    return getattr(thread_state, "key", None)


def bokeh_apps(scheduler) -> list:
    """The Bokeh server applications on ``scheduler``'s HTTP server (distributed's
    ``http_application.applications``); none when Bokeh is not imported in this process
    (then there is no dashboard, and importing Bokeh would cost about half a second)."""
    server = sys.modules.get("bokeh.server.server")
    if server is None:
        return []
    routing = getattr(scheduler, "http_application", None)
    return [a for a in getattr(routing, "applications", ()) if isinstance(a, server.BokehTornado)]


def served_paths(app) -> Iterable[str]:
    """The paths a Bokeh server application serves (its ``_applications``' keys)."""
    return getattr(app, "_applications", {})


def add_dashboard_page(scheduler, prefix: str, page: str,
                       make_doc: Callable[[object, dict, object], None]):
    """Serve ``make_doc(scheduler, variables, doc)`` at ``<prefix><page>`` from
    ``scheduler``'s HTTP server as one more page of distributed's dashboard, listed in
    its menu (``distributed.dashboard.scheduler.template_variables``, one dict per
    scheduler, and ``distributed.dashboard.core.BokehApplication``); the application,
    not yet started."""
    from distributed.dashboard.core import BokehApplication
    from distributed.dashboard.scheduler import template_variables

    variables = template_variables(scheduler)
    if page not in variables["pages"]:
        variables["pages"].append(page)
    return BokehApplication({"/" + page: make_doc}, scheduler, prefix=prefix,
                            template_variables=variables)


def bokeh_page_look() -> tuple:
    """distributed's dashboard look for a page of its own: its Jinja environment's
    ``simple.html`` template and its Bokeh theme
    (``distributed.dashboard.components.scheduler``'s ``env`` and ``BOKEH_THEME``)."""
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    return env.get_template("simple.html"), BOKEH_THEME


def origins_taken(app) -> set[str]:
    """The set of ``host:port`` origins a Bokeh server application takes websockets
    from (``BokehTornado.websocket_origins``, the set Bokeh checks each ``Origin``
    against): changed in place, it changes what the application accepts."""
    return app.websocket_origins


def http_address(http) -> tuple[str, int]:
    """The address and port distributed bound its HTTP server ``http`` to (the
    ``address`` and ``port`` attributes it sets on Tornado's server)."""
    return http.address, http.port


def gc_diagnosis_off() -> None:
    """Unhook distributed's GC diagnosis from every garbage collection in this process
    (``distributed.gc.disable_gc_diagnosis(force=True)``): Python swallows a
    KeyboardInterrupt raised in a GC callback."""
    from distributed.gc import disable_gc_diagnosis

    disable_gc_diagnosis(force=True)


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now
    (``multiprocessing.resource_tracker.ensure_running``), from the thread whose signal
    mask it should inherit."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def logging_disabled_level() -> int:
    """The level ``logging.disable`` set last (``logging.root.manager.disable``): what a
    caller gives back to ``logging.disable`` to undo its own call."""
    return logging.root.manager.disable


def clear_unhandled_interrupt() -> None:
    """Clear CPython's "unhandled KeyboardInterrupt" flag: a KeyboardInterrupt raised
    inside code run by ``exec()`` or ``eval()`` of a string sets it as it leaves that
    call, even when it is caught further up, and the interpreter then ends itself by
    SIGINT at exit; ``exec`` of a string clears it when it begins, and running nothing
    leaves it clear."""
    exec("")
