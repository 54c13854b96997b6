"""numba's on-disk cache follows the engine's source (``barsweep.engine.cache``: a folder
per version of it) and the strategies' kernels load from it in later processes
(``strategies/kernels.py``).

The end-to-end test runs a copy of the package in subprocesses: an unchanged rerun loads
the kernel from the cache, and an edit of a callee in another file of the engine (the fee
of ``fills.open_position``, inlined into every kernel) is seen by the next run.
"""

import importlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import pytest
from numba import njit

import barsweep.engine
from barsweep.engine import cache, get_strategy
from barsweep.engine.strategies import Param, Strategy, kernels

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path(__file__).with_name("custom_strategy_example.py")

# One sweep of the custom strategy of docs/STRATEGIES.md (a module outside the package that inlines
# engine code) with fees; prints its metrics and what the cache did.
RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import barsweep.engine as engine
    import user_strategy as user

    close = 100.0 * np.exp(np.cumsum(np.random.default_rng(3).normal(0.0, 0.01, 400)))
    bars = dict(open=close, high=close, low=close, close=close)
    out = engine.sweep_block(user.STRATEGY, bars, {"period": np.array([5, 10, 20])},
                             engine.Execution(fill="close", fees=0.01), 8760.0)
    stats = {name: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
             for name, f in (("kernel", user.STRATEGY.kernel), ("signal", user.signal))}
    print(json.dumps(dict(engine=engine.__file__, total_return=out[:, 0].tolist(),
                          stats=stats, kernel_cache=user.STRATEGY.kernel.stats.cache_path)))
""")


def run(tree: Path, **env) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    environ.update(PYTHONPATH=f"{tree / 'pkg'}{os.pathsep}{tree / 'user'}",
                   XDG_CACHE_HOME=str(tree / "cache"), **env)  # numba's user-wide folder
    done = subprocess.run([sys.executable, "-c", RUN], cwd=tree, env=environ,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def copy_tree(tree: Path) -> Path:
    """The package (``barsweep`` and its ``engine``) and a user strategy module, copied."""
    package = tree / "pkg" / "barsweep"
    shutil.copytree(ROOT / "engine", package / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("__init__.py", "errors.py", "version.py"):
        shutil.copy(ROOT / name, package / name)
    (tree / "user").mkdir()
    shutil.copy(EXAMPLE, tree / "user" / "user_strategy.py")
    return package / "engine"


def test_an_engine_edit_recompiles_and_an_unchanged_tree_loads(tmp_path):
    engine = copy_tree(tmp_path)
    first = run(tmp_path)
    assert first["engine"] == str(engine / "__init__.py")  # the copy, not the checkout
    assert first["stats"]["kernel"] == [0, 1]  # compiled cold
    assert first["kernel_cache"].startswith(str(tmp_path / "cache" / "numba"))

    again = run(tmp_path)
    assert again["stats"] == {"kernel": [1, 0], "signal": [0, 0]}  # loaded, nothing compiled
    assert again["total_return"] == first["total_return"]

    fills = engine / "core" / "fills.py"
    source = fills.read_text()
    fee = "size = (budget - fixed_fee) / (fill * (1.0 + fee_rate))"
    assert source.count(fee) == 1
    fills.write_text(source.replace(fee, fee.replace("fee_rate", "3.0 * fee_rate")))
    edited = run(tmp_path)
    assert edited["stats"]["kernel"] == [0, 1]  # the kernel's own file did not change
    hits, misses = edited["stats"]["signal"]
    assert hits == 0 and misses > 0  # nor the user's module: it inlines engine code too
    for before, after in zip(first["total_return"], edited["total_return"]):
        assert after < before  # entries now pay three times the fee


def test_a_user_cache_dir_holds_everything(tmp_path):
    """With NUMBA_CACHE_DIR the engine's functions, the strategy kernels and their
    modules go there, numba's caches in the engine version's folder (nothing is compiled
    here: only where the caches are)."""
    code = textwrap.dedent("""
        import json
        import numba
        import barsweep.engine as engine
        from barsweep.engine import cache
        from barsweep.engine.core import fills
        kernel = engine.get_strategy("rsi").kernel
        print(json.dumps([fills.open_position.stats.cache_path, kernel.stats.cache_path,
                          kernel.py_func.__code__.co_filename, numba.config.CACHE_DIR,
                          cache.engine_source_hash()]))
    """)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    done = subprocess.run([sys.executable, "-c", code], env=dict(environ, NUMBA_CACHE_DIR=str(
        tmp_path)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    engine_cache, kernel_cache, kernel_file, setting, digest = json.loads(
        done.stdout.splitlines()[-1])
    assert engine_cache.startswith(str(tmp_path)) and kernel_cache.startswith(str(tmp_path))
    assert Path(kernel_file).parent == tmp_path / "barsweep_kernels"
    assert Path(kernel_file).name.startswith("rsi_signal_")
    folder = tmp_path / f"barsweep-engine-{digest[:16]}"
    assert setting == str(folder)  # numba's setting; the environment is the user's
    assert Path(engine_cache).parent == Path(kernel_cache).parent == folder


def test_the_source_hash_covers_every_engine_file_cheaply(tmp_path, monkeypatch):
    digest = cache.engine_source_hash()
    before = cache.engine_source_hash.cache_info()
    assert len(digest) == 64 and digest == cache.engine_source_hash()
    after = cache.engine_source_hash.cache_info()  # computed once per process
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)
    engine_dir = Path(barsweep.engine.__file__).parent
    sources = sorted(p.relative_to(engine_dir) for p in engine_dir.rglob("*.py")
                     if "__pycache__" not in p.parts)
    assert Path("strategies", "kernels.py") in sources  # a subfolder's files count too
    copy = tmp_path / "engine"
    for rel in sources:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(engine_dir / rel, copy / rel)
    monkeypatch.setattr(cache, "ENGINE_DIR", str(copy))
    uncached = cache.engine_source_hash.__wrapped__
    assert uncached() == digest  # the same files, the same hash
    for rel in sources:  # one byte changed, or one more, in any engine file counts
        original = (copy / rel).read_bytes()
        (copy / rel).write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        assert uncached() != digest, rel
        (copy / rel).write_bytes(original + b"#")
        assert uncached() != digest, rel
        (copy / rel).write_bytes(original)
    (copy / "strategies" / "new_strategy.py").write_text("x = 1\n")
    assert uncached() != digest  # a new file counts
    (copy / "strategies" / "new_strategy.py").unlink()
    (copy / "strategies" / "kernels.py").rename(copy / "kernels.py")
    assert uncached() != digest  # so does a file moved to another folder
    (copy / "kernels.py").rename(copy / "strategies" / "kernels.py")
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "stale.py").write_text("x = 1\n")
    (copy / "notes.txt").write_text("not source\n")
    assert uncached() == digest  # caches and other files do not
    folder = cache.CACHE_DIR
    assert folder.name == f"barsweep-engine-{digest[:16]}"
    assert numba.config.CACHE_DIR == str(folder)
    assert cache.configure() == folder  # idempotent: a process started from this one


def test_numba_imported_before_the_engine_caches_in_its_folder(tmp_path):
    code = textwrap.dedent("""
        import json
        import numba
        before = numba.config.CACHE_DIR
        from barsweep.engine import cache
        from barsweep.engine.core import fills
        print(json.dumps([before, numba.config.CACHE_DIR, str(cache.CACHE_DIR),
                          fills.open_position.stats.cache_path]))
    """)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(environ, XDG_CACHE_HOME=str(tmp_path)), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after, folder, engine_cache = json.loads(done.stdout.splitlines()[-1])
    assert before == "" and after == folder
    assert Path(folder).parent == tmp_path / "numba"
    assert Path(engine_cache).parent == Path(folder)


def module_in(folder: Path, name: str, source: str):
    """Write ``source`` as ``folder/name.py`` and import it (``folder`` on sys.path only
    while importing)."""
    (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def test_every_cached_function_goes_to_the_engine_versions_folder(tmp_path):
    plain_numba_module = module_in(tmp_path, "plain_numba_module",
                                   "from numba import njit\n\n\n@njit(cache=True)\n"
                                   "def twice(x):\n    return 2 * x\n")

    import custom_strategy_example

    for function in (plain_numba_module.twice, custom_strategy_example.signal,
                     barsweep.engine.core.simulate.cross_above):
        assert Path(function.stats.cache_path).parent == cache.CACHE_DIR


def test_a_mark_says_a_function_compiled_for_its_present_source(tmp_path):
    marked_module = module_in(tmp_path, "marked_module",
                              "from numba import njit\n\n\n@njit(cache=True)\n"
                              "def twice(x):\n    return 2 * x\n\n\n@njit\n"
                              "def thrice(x):\n    return 3 * x\n")
    source = tmp_path / "marked_module.py"
    assert not cache.is_marked(marked_module.twice)
    assert marked_module.twice(2) == 4 and cache.mark_compiled(marked_module.twice)
    assert cache.is_marked(marked_module.twice)
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    assert not cache.is_marked(marked_module.twice)  # numba recompiles an edited file
    assert marked_module.thrice(2) == 6 and not cache.mark_compiled(marked_module.thrice)
    assert not cache.is_marked(marked_module.thrice)  # not cached on disk: never marked


def test_kernel_modules_are_written_when_first_needed(tmp_path):
    code = textwrap.dedent("""
        import json, os
        import barsweep.engine as engine
        folder = os.path.join(os.environ["NUMBA_CACHE_DIR"], "barsweep_kernels")
        written = [os.path.exists(folder)]
        engine.get_strategy("rsi").kernel
        print(json.dumps(written + [sorted(os.listdir(folder))]))
    """)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    done = subprocess.run([sys.executable, "-c", code], env=dict(environ, NUMBA_CACHE_DIR=str(
        tmp_path)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = json.loads(done.stdout.splitlines()[-1])
    assert before is False  # importing the engine, its strategies registered: nothing
    assert len(after) == 1 and after[0].startswith("rsi_signal_")


def test_one_kernel_module_per_signal():
    ema, sma, rsi = (get_strategy(n) for n in ("ema_cross", "sma_cross", "rsi"))
    assert ema.kernel is sma.kernel and ema.scan is sma.scan  # the crossover signal's
    assert ema.kernel is not rsi.kernel
    path = Path(rsi.kernel.py_func.__code__.co_filename)
    assert path.parent.name == "barsweep_kernels" and path.name.startswith("rsi_signal_")
    assert not path.is_relative_to(ROOT / "engine")  # the package holds its sources only
    text = path.read_text()
    assert "from barsweep.engine.strategies.rsi import signal\n" in text
    assert rsi.signal.py_func.__code__.co_filename in text
    assert kernels.compiled(rsi.signal).kernel is rsi.kernel


def test_strategy_pickles_into_a_fresh_process():
    """Unpickled elsewhere, a strategy imports its signal by name: its kernel is the
    cached module's, not a copy compiled in that process only."""
    import custom_strategy_example

    blob = pickle.dumps(custom_strategy_example.STRATEGY)
    assert pickle.loads(blob) == custom_strategy_example.STRATEGY
    code = ("import pickle, sys; s = pickle.loads(sys.stdin.buffer.read()); "
            "import custom_strategy_example as c; "
            "print(s.name, s.signal is c.signal, s.kernel is c.STRATEGY.kernel)")
    done = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], input=blob,
                          capture_output=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "engine")))
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert done.stdout.decode().split() == ["sma_trend", "True", "True"]


def test_a_signal_not_importable_by_name_compiles_in_process():
    @njit
    def signal(ind, rows, fparams, bars, t):
        return t == 0, False, False, False

    with pytest.warns(UserWarning, match="cannot be imported by name"):
        strategy = Strategy(name="_local", params=(), indicators=(), signal=signal)
    assert strategy.kernel.py_func.__code__.co_filename.startswith("<sweep kernel of")
    assert Strategy(name="_local", params=(), indicators=(), signal=signal) == strategy


def test_kernel_and_scan_come_as_a_pair():
    with pytest.raises(ValueError, match="both kernel and scan"):
        Strategy(name="_half", params=(Param("n"),), indicators=(),
                 signal=get_strategy("rsi").signal, kernel=get_strategy("rsi").kernel)
