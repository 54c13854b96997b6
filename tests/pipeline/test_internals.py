"""Each use barsweep makes of a dependency's internals (pipeline/run/internals.py), held
to what it relies on: a release of distributed, Bokeh or CPython that changes one fails
its test here, by name, before it fails a run in a way that is hard to trace.

Real objects only: a threads cluster of distributed with its dashboard, a real Bokeh
server application, child interpreters for what CPython does at exit and to signal
masks.
"""

import gc
import logging
import signal
import subprocess
import sys
import textwrap

import pytest
from distributed import Client, LocalCluster

from barsweep.pipeline.run import internals


@pytest.fixture(scope="module")
def cluster():
    """A threads cluster whose scheduler serves a dashboard on 127.0.0.1."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as started, Client(started) as client:
        yield started, client


def test_task_key_is_the_running_tasks_key(cluster):
    _, client = cluster
    future = client.submit(internals.task_key, pure=False)
    assert future.result() == future.key
    assert internals.task_key() is None  # outside a task


def test_the_dashboards_bokeh_applications_and_their_paths(cluster):
    started, _ = cluster
    apps = internals.bokeh_apps(started.scheduler)
    assert apps, "distributed's http_application.applications holds no BokehTornado"
    paths = {p for app in apps for p in internals.served_paths(app)}
    assert "/status" in paths, paths
    host, port = internals.http_address(started.scheduler.http_server)
    assert host == "127.0.0.1" and port > 0


def test_a_page_added_to_the_dashboard_is_served_and_in_its_menu(cluster):
    from distributed.dashboard.scheduler import template_variables

    started, _ = cluster
    app = internals.add_dashboard_page(started.scheduler, "/", "internals-test",
                                       lambda scheduler, extra, doc: None)
    assert "/internals-test" in set(internals.served_paths(app))
    assert "internals-test" in template_variables(started.scheduler)["pages"]


def test_websocket_origins_change_in_place(cluster):
    started, _ = cluster
    app = internals.bokeh_apps(started.scheduler)[0]
    origins = internals.origins_taken(app)
    before = set(origins)
    try:
        origins.clear()
        origins.add("example.invalid:1")
        assert app.websocket_origins == {"example.invalid:1"}
    finally:
        origins.clear()
        origins.update(before)


def test_the_dashboards_look():
    from bokeh.themes import Theme

    template, theme = internals.bokeh_page_look()
    assert isinstance(theme, Theme)
    assert "<html" in template.render().lower()


def test_gc_diagnosis_off_unhooks_distributeds_gc_callback():
    from distributed.gc import enable_gc_diagnosis

    internals.gc_diagnosis_off()  # a scheduler or worker of this process may have hooked it
    before = list(gc.callbacks)
    enable_gc_diagnosis()
    assert len(gc.callbacks) == len(before) + 1, "enable_gc_diagnosis hooks no callback"
    internals.gc_diagnosis_off()
    assert gc.callbacks == before


def test_logging_disabled_level_is_what_logging_disable_set():
    before = internals.logging_disabled_level()
    try:
        logging.disable(logging.ERROR)
        assert internals.logging_disabled_level() == logging.ERROR
    finally:
        logging.disable(before)
    assert internals.logging_disabled_level() == before


def child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_clear_unhandled_interrupt_lets_the_interpreter_exit_normally():
    """A KeyboardInterrupt that leaves an ``exec`` of a string, caught further up, still
    ends the interpreter by SIGINT at exit; cleared, it exits as the code says. If a
    CPython release stops doing the first, the workaround can go."""
    code = """
        try:
            exec("raise KeyboardInterrupt")
        except KeyboardInterrupt:
            pass
        {clear}
    """
    left = child(code.format(clear="pass"))
    assert left.returncode == -signal.SIGINT, (left.returncode, left.stderr)
    cleared = child(code.format(
        clear="from barsweep.pipeline.run.internals import clear_unhandled_interrupt; "
              "clear_unhandled_interrupt()"))
    assert cleared.returncode == 0, cleared.stderr


def test_a_resource_tracker_started_first_keeps_a_later_signal_mask():
    """multiprocessing starts its resource tracker with the first process and unblocks
    SIGINT and SIGTERM in the starting thread as it does; started first, the tracker
    leaves a mask set later alone. If a release stops unblocking, the first check
    fails and the early start can go."""
    code = """
        import multiprocessing, signal, sys
        {start}
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT, signal.SIGTERM}})
        p = multiprocessing.get_context("spawn").Process(target=print)
        p.start(); p.join()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        print(signal.SIGINT in blocked and signal.SIGTERM in blocked)
    """
    late = child(code.format(start="pass"))
    assert late.returncode == 0, late.stderr
    assert late.stdout.split()[-1] == "False", "starting the tracker no longer unblocks"
    early = child(code.format(start="from barsweep.pipeline.run.internals import "
                                    "start_resource_tracker; start_resource_tracker()"))
    assert early.returncode == 0, early.stderr
    assert early.stdout.split()[-1] == "True"


#: What only internals.py may name: imported names and attributes of dependencies'
#: internals, and the CPython details it wraps.
INTERNAL_NAMES = {"thread_state", "disable_gc_diagnosis", "enable_gc_diagnosis",
                  "resource_tracker", "BokehApplication", "BokehTornado", "BOKEH_THEME",
                  "_applications", "websocket_origins", "_getframe"}


def test_nothing_else_in_the_package_reaches_into_them():
    import ast
    from pathlib import Path

    import barsweep

    root = Path(barsweep.__file__).resolve().parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("tests/", "benchmarks/", "docs/", ".venv/")) or rel == \
                "pipeline/run/internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Attribute):
                names = [node.attr]
            elif isinstance(node, ast.Name):
                names = [node.id]
            elif isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names]
                if node.module in ("distributed.dashboard.scheduler", "distributed.gc",
                                   "distributed.dashboard.core"):
                    names.append(node.module)
            elif isinstance(node, ast.Import):
                names = [a.name.rpartition(".")[2] for a in node.names]
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "exec" and [
                    getattr(a, "value", None) for a in node.args] == [""]:
                names.append('exec("")')
            if isinstance(node, ast.Attribute) and node.attr == "disable" and isinstance(
                    node.value, ast.Attribute) and node.value.attr == "manager":
                names.append("manager.disable")
            for name in names:
                if (name in INTERNAL_NAMES or name in ("manager.disable", 'exec("")')
                        or name.startswith("distributed.")):
                    found.append(f"{rel}:{node.lineno}: {name}")
    assert not found, "\n".join(found)
