"""Run ``barsweep.sweep()`` twice in this process, as a notebook would, and print (as
JSON) what differs in the process's global state before and after each: warnings
filters, GC callbacks and settings, logging (levels, filters, handlers, ``disable``),
signal handlers and mask, exception hooks, the environment, the working directory and
Dask's configuration. Run by ``test_process_kept.py`` in a child interpreter.

    python process_state.py STORE CLUSTER
"""

import copy
import gc
import json
import logging
import os
import signal
import sys
import threading
import warnings

import dask
import distributed  # noqa: F401 - a notebook using Dask has it imported

# what other libraries do to the process the first time they are used, not barsweep:
# numcodecs and scipy add warnings filters as they are imported, xarray one each time
# it decodes a dataset
import numcodecs.checksum32  # noqa: F401, E402
import scipy.sparse  # noqa: F401, E402
import scipy.special  # noqa: F401, E402
import xarray as xr  # noqa: E402

import barsweep
import barsweep.engine  # noqa: F401 - its import points numba's cache (numba.config)

xr.decode_cf(xr.Dataset())

#: distributed's own loggers collect a handler per Scheduler and Worker object (its
#: ``get_logs`` deque), removed when the object is collected; distributed keeps the
#: objects of a closed cluster alive in a cache of its RPC handlers
#: (``distributed.core._expects_comm``), with or without barsweep: their handler
#: lists are not compared.
HANDLERS_NOT_COMPARED = ("distributed.scheduler", "distributed.worker")


def loggers() -> dict:
    out = {"": (logging.root.level, [id(h) for h in logging.root.handlers],
                [id(f) for f in logging.root.filters])}
    for name, lg in logging.root.manager.loggerDict.items():
        if isinstance(lg, logging.Logger):
            handlers = [] if name in HANDLERS_NOT_COMPARED else [id(h) for h in lg.handlers]
            out[name] = (lg.level, lg.propagate, lg.disabled, handlers,
                         [id(f) for f in lg.filters])
    return out


def snapshot() -> dict:
    gc.collect()
    catchable = [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)]
    return {
        "warnings filters": [repr(f) for f in warnings.filters],
        "gc callbacks": [repr(c) for c in gc.callbacks],
        "gc": [gc.isenabled(), list(gc.get_threshold())],
        "loggers": loggers(),
        "logging.disable": logging.root.manager.disable,
        "signal handlers": {s.name: repr(signal.getsignal(s)) for s in catchable},
        "signal mask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "hooks": [repr(sys.excepthook), repr(threading.excepthook),
                  repr(sys.unraisablehook), repr(warnings.showwarning)],
        "environment": dict(os.environ),
        "cwd": os.getcwd(),
        "dask config": repr(copy.deepcopy(dask.config.config)),
    }


def changed(before: dict, after: dict) -> dict:
    out = {}
    for key, value in before.items():
        if key == "loggers":  # loggers made since are new, not changed
            diff = {n: [v, after[key].get(n)] for n, v in value.items()
                    if after[key].get(n) != v}
        elif isinstance(value, dict):
            diff = {n: [value.get(n), after[key].get(n)] for n in {*value, *after[key]}
                    if after[key].get(n) != value.get(n)}
        else:
            diff = [value, after[key]] if after[key] != value else None
        if diff:
            out[key] = diff
    return out


def main() -> None:
    store, cluster, out = sys.argv[1], sys.argv[2], sys.argv[3]
    changes = []
    for i in range(2):
        before = snapshot()
        barsweep.sweep(store, "ema_cross", {"fast": [5, 8], "slow": [20, 30]},
                       symbols="AAA", timeframe="1h", out=f"{out}{i}.zarr", cluster=cluster,
                       n_workers=1)
        changes.append(changed(before, snapshot()))
    print(json.dumps(changes, default=str))


if __name__ == "__main__":
    main()
