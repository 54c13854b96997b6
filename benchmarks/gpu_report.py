"""The GPU check's environment probe and its report (see ``gpu_check.py``).

``probe`` says what the machine offers: the Python stack, the CUDA driver, runtime, NVVM
and libdevice that numba-cuda uses (and the libraries the process really loaded), the
GPU, and whether the carried packages import; ``table`` turns the rows the steps left in
the output folder into ``GPU_RESULTS.md``.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HEAD = ["what", "strategy", "execution", "combos", "GPU kernel M combo-bars/s",
        "GPU whole call M combo-bars/s", "CPU M combo-bars/s", "GPU kernel / CPU",
        "max rel diff vs CPU", "result", "notes"]
#: The packages the GPU machine's image lacks, carried as wheels (fetch_gpu_wheels.sh).
CARRIED = ("dask", "distributed", "zarr", "pydantic", "bokeh", "tornado")
#: Shared libraries whose loaded paths say which CUDA toolkit and driver were used.
CUDA_LIBS = ("libcuda.so", "libnvvm", "libnvrtc", "libnvJitLink", "libcudart")
#: The probe's facts that the report's heading quotes, in this order.
HEADLINE = ("device", "compute capability", "multiprocessors", "python", "numba",
            "numba-cuda", "driver version", "runtime version", "NVVM version",
            "loaded libnvvm", "libdevice", "CUDA_HOME")


def log(msg: str) -> None:
    """One line to stdout, flushed, stamped with the time of day."""
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def emit(out: Path, cells: list[str], ok: bool) -> None:
    """Append one table row to ``out/rows.jsonl`` (at once: a step may be stopped)."""
    cells = [*cells, *[""] * (len(HEAD) - len(cells))]
    with open(out / "rows.jsonl", "a") as f:
        f.write(json.dumps({"cells": cells, "ok": bool(ok)}) + "\n")


# -- probe ---------------------------------------------------------------------------

def loaded_cuda_libs() -> dict[str, str]:
    """The CUDA libraries this process has loaded, by name, from /proc/self/maps."""
    found: dict[str, str] = {}
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return found
    for line in maps:
        path = line.split()[-1] if line.split() else ""
        for lib in CUDA_LIBS:
            if Path(path).name.startswith(lib):
                found.setdefault(lib, path)
    return found


def attempt(what: str, call, facts: dict) -> object:
    """``facts[what] = call()`` as text, or the error in one line; returns the value."""
    try:
        value = call()
        facts[what] = str(value)
        return value
    except Exception as exc:
        facts[what] = f"unavailable ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        return None


#: numba.cuda, imported by the probe (the report needs no numba)
cuda = None


def add_one(a):
    """A small kernel: the probe compiles and runs it (``cuda`` is a global, so that the
    simulator can stand in for it)."""
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0


def device_name(device) -> str:
    """The GPU's name (the simulator's fake device has none)."""
    name = getattr(device, "name", None)
    if name is None:
        return "numba's CUDA simulator"
    return name.decode() if isinstance(name, bytes) else str(name)


def cuda_facts(facts: dict) -> bool:
    """Fill ``facts`` with the GPU, driver, runtime, NVVM and libdevice numba-cuda uses,
    after compiling and running a small kernel; True if that kernel ran right."""
    global cuda
    from numba import cuda

    def tiny() -> bool:
        host = np.arange(256.0)
        d = cuda.to_device(host)
        cuda.jit(add_one)[2, 128](d)
        return bool(np.array_equal(d.copy_to_host(), host + 1.0))

    ok = attempt("tiny kernel ran right", tiny, facts) is True
    dev = attempt("device", lambda: device_name(cuda.get_current_device()), facts)
    if dev is not None:
        dev = cuda.get_current_device()
        attempt("compute capability", lambda: dev.compute_capability, facts)
        attempt("multiprocessors", lambda: dev.MULTIPROCESSOR_COUNT, facts)
    from importlib import import_module

    def drv(name: str):
        return import_module(f"numba.cuda.cudadrv.{name}")

    attempt("driver version", lambda: drv("driver").driver.get_version(), facts)
    attempt("runtime version", lambda: drv("runtime").get_version(), facts)
    attempt("NVVM version", lambda: drv("nvvm").NVVM().get_version(), facts)
    attempt("NVVM IR version", lambda: drv("nvvm").NVVM().get_ir_version(), facts)
    attempt("libdevice", lambda: drv("libs").get_libdevice(), facts)
    attempt("cuda paths", lambda: {k: tuple(v) for k, v in import_module(
        "numba.cuda.cuda_paths").get_cuda_paths().items()}, facts)
    for lib, path in loaded_cuda_libs().items():
        facts[f"loaded {lib}"] = path
    return ok


def toolkit_candidates() -> list[str]:
    """CUDA toolkit roots on this machine that hold NVVM (for CUDA_HOME), best first."""
    roots = sorted(glob.glob("/usr/local/cuda*/nvvm/lib64/libnvvm.so*"))
    for entry in sys.path:
        roots += sorted(glob.glob(f"{entry}/nvidia/cu1*/nvvm/lib64/libnvvm.so*"))
        roots += sorted(glob.glob(f"{entry}/nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so*"))
    homes = [str(Path(p).parents[2]) for p in roots]
    return list(dict.fromkeys(homes))


def package_facts(facts: dict) -> bool:
    """Versions and places of the carried packages and barsweep; True if all import."""
    from importlib import import_module, metadata

    ok = True
    for name in (*CARRIED, "barsweep"):
        try:
            module = import_module(name)
            where = str(Path(module.__file__).parent)
            try:
                version = metadata.version(name)
            except Exception:
                version = getattr(module, "__version__", "?")
            facts[f"import {name}"] = f"{version} from {where}"
        except Exception as exc:
            ok = False
            facts[f"import {name}"] = f"FAILED ({type(exc).__name__}: {str(exc)[:160]})"
    return ok


def probe(args) -> int:
    """What this machine offers: the Python stack, CUDA as numba-cuda finds it, and the
    carried packages; ``probe.json`` and ``probe.env`` in ``args.out``."""
    import numba

    facts: dict[str, str] = {"python": f"{platform.python_version()} ({sys.executable})",
                             "numba": numba.__version__,
                             "CUDA_HOME": os.environ.get("CUDA_HOME", "(unset)"),
                             "simulator": str(numba.config.ENABLE_CUDASIM)}
    from importlib import metadata

    for dist in ("numba-cuda", "cuda-bindings", "cuda-core", "cuda-pathfinder", "numpy",
                 "pandas", "xarray", "pyarrow", "cupy-cuda13x"):
        attempt(dist, lambda d=dist: metadata.version(d), facts)
    cuda_ok = cuda_facts(facts)
    carried_ok = package_facts(facts)
    for key, value in facts.items():
        log(f"{key}: {value}")
    (args.out / "probe.json").write_text(json.dumps(facts, indent=1) + "\n")
    # another toolkit can help only where the driver answers and compiling failed
    driver_ok = not facts["driver version"].startswith("unavailable")
    candidates = toolkit_candidates() if driver_ok and not cuda_ok else []
    (args.out / "probe.env").write_text(
        f"CUDA_OK={int(cuda_ok)}\nCARRIED_OK={int(carried_ok)}\n"
        f"CANDIDATES='{' '.join(candidates)}'\n")
    log(f"CUDA {'works' if cuda_ok else 'does not work: ' + facts['tiny kernel ran right']}"
        f"; carried packages "
        f"{'import' if carried_ok else 'do not all import'}")
    return 0 if cuda_ok else 3




# -- table ---------------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict]:
    """The JSON lines of ``path`` (none if it is missing; a torn last line is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def markdown(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table, ``|`` in cells escaped."""
    def fmt(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [fmt(head), "|" + "---|" * len(head), *[fmt(r) for r in rows]]


def environment(facts: dict) -> str:
    """One sentence on the machine and CUDA stack from the probe's facts."""
    if not facts:
        return "(no probe: its step did not finish)"
    return "; ".join(f"{k} {facts[k]}" for k in HEADLINE
                     if not facts.get(k, "unavailable").startswith("unavailable"))


def table(args) -> int:
    """``GPU_RESULTS.md`` in ``args.out`` from the steps' records; printed too. Exit 0
    only if every step ended well and every row passed."""
    out: Path = args.out
    facts = json.loads((out / "probe.json").read_text()) if (out / "probe.json").exists() \
        else {}
    steps = read_jsonl(out / "steps.jsonl")
    rows = read_jsonl(out / "rows.jsonl")
    last = {s["step"]: i for i, s in enumerate(steps)}  # a step tried again: its last try
    for i, s in enumerate(steps):
        s["counts"] = last[s["step"]] == i and not s.get("advisory")
    ok = bool(steps) and all(s["rc"] == 0 for s in steps if s["counts"]) and \
        all(r["ok"] for r in rows)
    said = {0: "ok", 124: "timed out", 137: "timed out", 125: "not run"}
    step_rows = [[s["step"], said.get(s["rc"], f"exit {s['rc']}") +
                  (" (advisory)" if s.get("advisory") else "" if s["counts"] else
                   " (tried again)"),
                  s["seconds"], s["limit"], s.get("note", "")] for s in steps]
    lines = [
        f"# GPU check ({time.strftime('%Y-%m-%d %H:%M %Z')})", "",
        f"`{' '.join(['benchmarks/gpu_check.sh', args.mode_flag]).strip()}` on: "
        f"{environment(facts)}.", "",
        f"{args.bars:,} bars; tolerance vs the CPU kernel: rtol 1e-9, atol 1e-12, trade "
        f"counts identical. Target: >= 100,000 M combo-bars/s. Seconds per stage in the "
        f"notes: `bars` includes the host's preparation of the block.", "",
        *markdown(["step", "result", "seconds", "limit s", "note"], step_rows), "",
        *markdown(HEAD, [r["cells"] for r in rows]), "",
        f"Result: **{'PASS' if ok else 'FAIL'}**.",
    ]
    report = "\n".join(lines) + "\n"
    (out / "GPU_RESULTS.md").write_text(report)
    print(report, flush=True)
    return 0 if ok else 1
