"""numba's cache and the generated modules go only to folders no one else can write
(``barsweep.engine.cache``): a folder planted in the temporary directory by another user,
or made writable for everyone, is passed over with a warning, and a private one is used.

Each case imports the engine in a fresh process, as a worker or a command does, with the
candidates laid out for real: ``NUMBA_CACHE_DIR`` unset or given, numba's user-wide folder
made unusable (``XDG_CACHE_HOME`` and ``HOME`` under a file), ``TMPDIR`` a test folder.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from barsweep.engine import cache

UID = os.getuid() if hasattr(os, "getuid") else None
pytestmark = pytest.mark.skipif(UID is None, reason="POSIX owners and modes")

#: What the engine chose: its cache folder, whether numba caches its functions there,
#: and the warnings the import gave.
IMPORT = textwrap.dedent("""
    import json, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import barsweep.engine
        from barsweep.engine import cache
        from barsweep.engine.core import fills
    print(json.dumps(dict(folder=str(cache.CACHE_DIR), base=str(cache.BASE),
                          numba=fills.open_position.stats.cache_path,
                          warnings=[str(w.message) for w in caught
                                    if w.category is cache.CacheFolderWarning])))
""")


def import_engine(tmp: Path, **env: str) -> dict:
    """Import the engine in a new process with ``TMPDIR=tmp``, no usable user-wide
    folder, and ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    nowhere = tmp.parent / "a-file"
    nowhere.write_text("")
    environ.update(TMPDIR=str(tmp), XDG_CACHE_HOME=str(nowhere / "cache"),
                   HOME=str(nowhere / "home"), **env)
    done = subprocess.run([sys.executable, "-c", IMPORT], env=environ, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def sticky_tmp(tmp_path: Path) -> Path:
    """A temporary directory as ``/tmp`` is: everyone may write it, sticky."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    return tmp


def plant(folder: Path) -> None:
    """``folder`` as another user leaves it: writable by everyone, holding a module in
    each of the folders the engine imports generated modules from."""
    digest = cache.engine_source_hash()[:16]
    for sub in ("barsweep_kernels", "barsweep_rules", f"barsweep-engine-{digest}"):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "planted.py").write_text("open('PWNED', 'w')\n")
    for path in (folder, *folder.iterdir()):
        path.chmod(0o777)


def assert_private(folder: Path) -> None:
    info = os.lstat(folder)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == UID
    assert stat.S_IMODE(info.st_mode) == 0o700, oct(info.st_mode)


def test_the_temporary_fallback_is_made_private(tmp_path):
    tmp = sticky_tmp(tmp_path)
    got = import_engine(tmp)
    base = tmp / f"numba-{UID}"
    assert Path(got["base"]) == base and Path(got["folder"]).parent == base
    assert Path(got["numba"]).parent == Path(got["folder"])  # numba's own cache there
    for folder in (base, Path(got["folder"])):
        assert_private(folder)
    assert len(got["warnings"]) == 1  # numba's user-wide folder was passed over, visibly
    assert "not in " in got["warnings"][0] and "cannot be made" in got["warnings"][0]


def test_a_planted_world_writable_cache_folder_is_not_used(tmp_path):
    """``$TMPDIR/numba-UID`` made by someone else beforehand (mode 0777, modules planted
    in it): the engine caches in a private folder of its own and says so; a second
    process finds that one again."""
    tmp = sticky_tmp(tmp_path)
    planted = tmp / f"numba-{UID}"
    plant(planted)
    got = import_engine(tmp)
    base = Path(got["base"])
    assert base != planted and base.parent == tmp and base.name.startswith(f"numba-{UID}-")
    assert Path(got["numba"]).parent == Path(got["folder"]) and Path(got["folder"]).parent == base
    assert_private(base)
    assert_private(Path(got["folder"]))
    assert any(f"{planted} (mode 0777: others may write it" in w for w in got["warnings"])
    assert not (tmp_path / "PWNED").exists()
    assert sorted(p.name for p in planted.iterdir()) == sorted(  # nothing written there
        ["barsweep_kernels", "barsweep_rules", Path(got["folder"]).name])
    again = import_engine(tmp)
    assert again["base"] == got["base"]  # reused, not a new folder per process


def test_a_cache_folder_of_another_user_is_not_used(tmp_path):
    if UID != 0:
        pytest.skip("only root can give a folder to another user")
    tmp = sticky_tmp(tmp_path)
    planted = tmp / f"numba-{UID}"
    planted.mkdir(mode=0o700)
    os.chown(planted, 65534, 65534)
    got = import_engine(tmp)
    assert Path(got["base"]).parent == tmp and Path(got["base"]) != planted
    assert any(f"{planted} (owned by uid 65534" in w for w in got["warnings"])


@pytest.mark.parametrize("where", ["leaf", "subfolder", "parent"])
def test_a_given_numba_cache_dir_others_can_write_is_passed_over(tmp_path, where):
    """``NUMBA_CACHE_DIR`` as the user gives it, writable by others: itself, one of the
    folders barsweep imports code from in it, or the folder above it (not sticky: anyone
    may put another folder in its place)."""
    tmp = sticky_tmp(tmp_path)
    parent = tmp_path / "shared"
    given = parent / "numba"
    (given / "barsweep_rules").mkdir(parents=True, mode=0o700)
    given.chmod(0o700)
    parent.chmod(0o700)
    {"leaf": given, "subfolder": given / "barsweep_rules", "parent": parent}[where].chmod(0o777)
    got = import_engine(tmp, NUMBA_CACHE_DIR=str(given))
    assert Path(got["base"]) == tmp / f"numba-{UID}"
    assert str(given) in got["warnings"][0]
    private = tmp_path / "mine"
    private.mkdir(mode=0o700)
    mine = import_engine(tmp, NUMBA_CACHE_DIR=str(private / "numba"))
    assert Path(mine["base"]) == private / "numba" and mine["warnings"] == []
    assert_private(private / "numba")


def test_folder_problem_in_process(tmp_path):
    """The check itself: a link, a file, modes and a parent others may rename in."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert cache.folder_problem(mine) is None
    (tmp_path / "link").symlink_to(mine)
    assert "a link, not a folder" in cache.folder_problem(tmp_path / "link")
    (tmp_path / "file").write_text("")
    assert "a file, not a folder" in cache.folder_problem(tmp_path / "file")
    mine.chmod(0o720)
    assert "mode 0720: others may write it" in cache.folder_problem(mine)
    mine.chmod(0o755)  # others may read: nothing planted that way
    assert cache.folder_problem(mine) is None
    tmp_path.chmod(0o777)
    try:
        assert f"in {tmp_path}: mode 0777" in cache.folder_problem(mine)
        tmp_path.chmod(0o1777)
        assert cache.folder_problem(mine) is None  # sticky, as /tmp
    finally:
        tmp_path.chmod(0o700)
    made = tmp_path / "a" / "b"
    assert cache.private_folder(made) is None
    assert_private(tmp_path / "a")
    assert_private(made)


def test_kernel_modules_go_only_to_private_folders(tmp_path):
    """A strategy kernel's module is imported only from a private folder: with both of
    its places writable by others (the cache's ``barsweep_kernels``, made so after the
    engine chose it, and ``__pycache__/barsweep_kernels`` beside the signal), the kernel
    is compiled in the process, with a warning naming both, and nothing is written or
    imported there."""
    user = tmp_path / "user"
    beside = user / "__pycache__" / "barsweep_kernels"
    beside.mkdir(parents=True)
    beside.chmod(0o777)
    example = Path(__file__).with_name("custom_strategy_example.py")
    (user / "user_strategy.py").write_text(example.read_text())
    code = textwrap.dedent("""
        import json, os, warnings
        from barsweep.engine import cache
        (cache.BASE / "barsweep_kernels").mkdir(mode=0o777)
        (cache.BASE / "barsweep_kernels").chmod(0o777)
        import user_strategy
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kernel = user_strategy.STRATEGY.kernel
        print(json.dumps(dict(file=kernel.py_func.__code__.co_filename,
                              kernels=str(cache.BASE / "barsweep_kernels"),
                              warnings=[str(w.message) for w in caught])))
    """)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    cache_dir = tmp_path / "numba"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(environ, NUMBA_CACHE_DIR=str(cache_dir),
                                   PYTHONPATH=str(user)), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["file"].startswith("<")  # compiled from text in the process
    [warning] = [w for w in got["warnings"] if "no private writable folder" in w]
    assert f"{got['kernels']} (mode 0777" in warning and f"{beside} (mode 0777" in warning
    assert list(beside.iterdir()) == [] and list(Path(got["kernels"]).iterdir()) == []


def test_generated_modules_folders_are_made_private(tmp_path):
    from barsweep.engine.strategies import kernels

    path = kernels.write_module(tmp_path / "barsweep_rules" / "rule_x.py", "x = 1\n")
    assert path.read_text() == "x = 1\n"
    assert_private(tmp_path / "barsweep_rules")


#: Importing barsweep and the engine, then compiling a function of a module of the
#: user's, starting a process as a Dask worker is started, changing a ``NUMBA_`` variable
#: and compiling again (numba then re-reads its environment), and writing a strategy's
#: kernel module.
UNTOUCHED = textwrap.dedent("""
    import json, os, subprocess, sys
    before = dict(os.environ)
    import barsweep
    import barsweep.engine as engine
    import numba
    from barsweep.engine import cache
    imported = dict(os.environ)
    import tiny
    assert tiny.twice(2) == 4
    worker = subprocess.run(
        [sys.executable, "-c", "from barsweep.engine import cache; print(cache.CACHE_DIR)"],
        capture_output=True, text=True, check=True).stdout.strip()
    set_before = numba.config.CACHE_DIR
    os.environ["NUMBA_DEBUG_CACHE"] = "0"
    assert numba.njit(lambda x: x + 1)(1) == 2
    reset = numba.config.CACHE_DIR
    kernel = engine.get_strategy("rsi").kernel
    print(json.dumps(dict(same=before == imported, folder=str(cache.CACHE_DIR),
                          setting=set_before, worker=worker, reset=reset,
                          tiny=tiny.twice.stats.cache_path,
                          kernel=kernel.stats.cache_path)))
""")


def test_importing_the_engine_leaves_the_environment_alone(tmp_path):
    """``import barsweep.engine`` changes no environment variable: numba's own setting
    (``numba.config.CACHE_DIR``) names the engine's folder, where a function compiled
    after the import caches its code; a process started from this one (a Dask worker)
    names the same folder from the same environment; and when numba re-reads a changed
    environment, which resets its setting, the kernels the engine writes later still
    cache in the engine's folder."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "tiny.py").write_text("from numba import njit\n\n\n@njit(cache=True)\n"
                                  "def twice(x):\n    return 2 * x\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    pythonpath = os.pathsep.join(filter(None, [str(user), environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", UNTOUCHED], capture_output=True, text=True,
                          env=dict(environ, XDG_CACHE_HOME=str(tmp_path / "xdg"),
                                   PYTHONPATH=pythonpath), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    folder = Path(got["folder"])
    assert got["same"]  # nothing set, nothing removed
    assert folder.parent == tmp_path / "xdg" / "numba" and got["setting"] == str(folder)
    assert Path(got["tiny"]).parent == folder  # numba's folder for the module's folder
    assert sorted(p.suffix for p in Path(got["tiny"]).glob("tiny.twice-*")) == [".nbc", ".nbi"]
    assert got["worker"] == str(folder)
    assert got["reset"] == ""  # numba's setting follows its environment again
    assert Path(got["kernel"]).parent == folder  # the engine pointed it back first
