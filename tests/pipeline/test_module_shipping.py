"""A spec's strategy modules shipped to workers (``pipeline/run/shipping.py``,
``engine/strategies/sources.py``): only the named modules' Python files travel, no link
leads out of them, the worker's copy lies in a private folder of its user, named by its
hash and checked before it is imported, and nothing else in that folder (nor in the
spec's folder) can stand in for another module.

The shipping cases run on a real LocalCluster whose workers have a temporary folder of
their own (``TMPDIR``, sticky and writable by everyone, as ``/tmp``); the module's folder
is moved away after the driver read it, so that the workers import the copy.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import cloudpickle
import pytest
from distributed import Client, LocalCluster

from barsweep.errors import DataError, SpecError
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.run.shipping import ModuleShipper, files_digest, module_files

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers' functions

UID = os.getuid()
SPEC = {"data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [5], "slow": [20]}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A LocalCluster of one worker process whose temporary folder is ``tmp``."""
    tmp = tmp_path_factory.mktemp("worker-tmp")
    tmp.chmod(0o1777)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp))
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as local, Client(local) as client:
            yield client, tmp


def package(root: Path, name: str, extra: dict[str, str] | None = None) -> Path:
    """``root/name/``: a package of two modules (``name.sub``), and ``extra`` files."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(f"NAME = {name!r}\n")
    (folder / "sub.py").write_text("VALUE = 42\n")
    for rel, text in (extra or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def ship(client: Client, root: Path, name: str) -> ModuleShipper:
    """The driver reads ``root/name``, the folder goes away, the workers get a copy."""
    shipper = ModuleShipper(str(root), [name])
    root.rename(root.with_name(root.name + "-moved"))
    client.register_plugin(shipper)
    return shipper


def imported_on_worker(name: str) -> dict:
    """On a worker: where ``name`` and ``colorsys`` (standard library, imported by no
    one before) come from, and the files of ``name``'s folder with their modes."""
    import colorsys
    import importlib
    import os

    module = importlib.import_module(f"{name}.sub")
    folder = os.path.dirname(os.path.dirname(module.__file__))
    files = {}
    for parent, subfolders, names in os.walk(folder):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        for entry in [*subfolders, *names]:
            path = os.path.join(parent, entry)
            info = os.lstat(path)
            files[os.path.relpath(path, folder)] = (info.st_mode, info.st_uid)
    base = os.lstat(os.path.dirname(folder))
    return dict(folder=folder, value=module.VALUE, colorsys=colorsys.__file__, files=files,
                base=(base.st_mode, base.st_uid))


def test_only_python_sources_go_to_a_private_content_addressed_copy(cluster, tmp_path):
    """A 0600 ``creds.env``, a data file and a hidden module stay behind; a folder that is
    no subpackage goes (a namespace folder: importable); a link inside the package
    travels as its file; the copy is
    ``barsweep-modules-UID/<hash>`` (0700), its files 0600."""
    client, tmp = cluster
    root = tmp_path / "project"
    folder = package(root, "shipped_a", {"creds.env": "TOKEN=secret\n", "data.csv": "1,2\n",
                                         ".hidden.py": "X = 1\n", "notes/x.py": "X = 1\n",
                                         "inner/__init__.py": "", "inner/deep.py": "Y = 2\n"})
    (folder / "creds.env").chmod(0o600)
    (folder / "alias.py").symlink_to(folder / "sub.py")
    shipper = ship(client, root, "shipped_a")
    assert sorted(shipper.files) == ["shipped_a/__init__.py", "shipped_a/alias.py",
                                     "shipped_a/inner/__init__.py", "shipped_a/inner/deep.py",
                                     "shipped_a/notes/x.py", "shipped_a/sub.py"]
    [got] = client.run(imported_on_worker, "shipped_a").values()
    assert got["value"] == 42
    assert Path(got["folder"]) == tmp / f"barsweep-modules-{UID}" / shipper.digest
    assert shipper.digest == files_digest(shipper.files) and len(shipper.digest) == 64
    assert stat.S_IMODE(got["base"][0]) == 0o700 and got["base"][1] == UID
    modes = {rel: stat.S_IMODE(mode) for rel, (mode, uid) in got["files"].items()}
    assert modes == {"shipped_a": 0o700, "shipped_a/__init__.py": 0o600,
                     "shipped_a/alias.py": 0o600, "shipped_a/sub.py": 0o600,
                     "shipped_a/inner": 0o700, "shipped_a/inner/__init__.py": 0o600,
                     "shipped_a/inner/deep.py": 0o600, "shipped_a/notes": 0o700,
                     "shipped_a/notes/x.py": 0o600}
    assert not any(stat.S_ISLNK(mode) for mode, _ in got["files"].values())


def test_a_planted_modules_folder_shadows_nothing(cluster, tmp_path):
    """Folders planted beforehand where the copy goes (writable by everyone, holding the
    module and a ``colorsys.py``): the worker imports the module from a private folder
    of its own, and ``colorsys`` from the standard library."""
    client, tmp = cluster
    root = tmp_path / "project"
    package(root, "shipped_b")
    digest = files_digest(module_files(str(root), ["shipped_b"]))
    planted = [tmp / "barsweep-modules" / digest[:16],  # a shared folder, per version
               tmp / f"barsweep-modules-{UID}" / digest]  # this user's name, not its own
    for copy in planted:
        (copy / "shipped_b").mkdir(parents=True)
        for rel in ("__init__.py", "sub.py"):
            (copy / "shipped_b" / rel).write_bytes((root / "shipped_b" / rel).read_bytes())
        (copy / "colorsys.py").write_text("PLANTED = True\n")
        for path in (copy.parent, copy, copy / "shipped_b"):
            path.chmod(0o777)
    ship(client, root, "shipped_b")
    [got] = client.run(imported_on_worker, "shipped_b").values()
    assert got["value"] == 42
    assert not got["colorsys"].startswith(str(tmp)), got["colorsys"]
    base = Path(got["folder"]).parent
    assert base not in [p.parent for p in planted] and base.parent == tmp
    assert base.name.startswith(f"barsweep-modules-{UID}-")
    assert stat.S_IMODE(got["base"][0]) == 0o700 and got["base"][1] == UID


def test_a_link_out_of_the_module_is_refused_in_one_line(tmp_path):
    """A module file linked to a file elsewhere (as to ``/etc/shadow``), in a package or
    as the module itself: refused naming the link, by the spec's check and the shipper."""
    secret = tmp_path / "elsewhere" / "shadow"
    secret.parent.mkdir()
    secret.write_text("root:$6$secret\n")
    root = tmp_path / "project"
    folder = package(root, "leaky")
    (folder / "leak.py").symlink_to(secret)
    (root / "single.py").symlink_to(secret)
    for name, link in (("leaky", folder / "leak.py"), ("single", root / "single.py")):
        with pytest.raises(DataError) as shipped:
            ModuleShipper(str(root), [name])
        message = str(shipped.value)
        assert f"{link} is a symbolic link to {secret}" in message and "\n" not in message
        with pytest.raises(SpecError) as parsed:
            parse_spec({**SPEC, "module_dir": str(root), "modules": [name]})
        assert f"{link} is a symbolic link to {secret}" in str(parsed.value)
        assert name not in sys.modules


def test_a_folder_that_is_not_a_package_is_not_a_module(tmp_path):
    """``module_dir: /``, ``modules: [etc]``: refused at once, nothing under /etc read."""
    before = read_bytes()
    with pytest.raises(DataError) as shipped:
        ModuleShipper("/", ["etc"])
    assert "/etc is a folder without __init__.py, not a Python package" in str(shipped.value)
    assert read_bytes() - before < 1 << 20
    with pytest.raises(SpecError) as parsed:
        parse_spec({**SPEC, "module_dir": "/", "modules": ["etc"]})
    assert "modules[0]: cannot import strategy module 'etc': /etc is a folder without " \
           "__init__.py" in str(parsed.value)


def test_the_size_cap_is_checked_before_anything_is_read(tmp_path):
    """A 300 MB module file (sparse: nothing on disk) is refused from its size, before
    its bytes are read."""
    root = tmp_path / "project"
    folder = package(root, "huge")
    (folder / "big.py").touch()
    os.truncate(folder / "big.py", 300_000_000)
    before = read_bytes()
    with pytest.raises(DataError) as shipped:
        ModuleShipper(str(root), ["huge"])
    assert read_bytes() - before < 1 << 20
    assert "more than the 32 MiB" in str(shipped.value)
    assert f"{folder / 'big.py'}" in str(shipped.value)


def test_a_standard_library_name_is_refused(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "json.py").write_text("PLANTED = True\n")
    with pytest.raises(SpecError) as parsed:
        parse_spec({**SPEC, "module_dir": str(root), "modules": ["json"]})
    assert "'json' is the name of a standard library module" in str(parsed.value)
    with pytest.raises(DataError, match="'json' is the name of a standard library module"):
        ModuleShipper(str(root), ["json"])
    from barsweep.engine.strategies.sources import serve

    with pytest.raises(SpecError, match="a standard library module's name"):
        serve("json", str(root))


def test_other_files_of_module_dir_are_not_importable(tmp_path):
    """The spec's folder holds the module and a ``colorsys.py``: importing the module
    from there does not put the folder on ``sys.path``."""
    root = tmp_path / "project"
    package(root, "beside_stdlib")
    (root / "colorsys.py").write_text("PLANTED = True\n")
    from barsweep.engine.strategies import import_strategy_module

    import_strategy_module("beside_stdlib.sub", root)
    assert sys.modules["beside_stdlib.sub"].VALUE == 42
    assert str(root) not in sys.path
    import colorsys

    assert not hasattr(colorsys, "PLANTED")


def test_a_damaged_copy_is_written_again(tmp_path, monkeypatch):
    """The copy checked before use: an edited file, an extra module or a link in it, and
    it is replaced by the files shipped."""
    import tempfile

    from barsweep.pipeline.run.shipping import module_folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    root = tmp_path / "project"
    package(root, "copied")
    files = module_files(str(root), ["copied"])
    digest = files_digest(files)
    elsewhere = str(tmp_path / "not-here")
    copy = Path(module_folder(elsewhere, files, digest))
    assert copy == tmp_path / "tmp" / f"barsweep-modules-{UID}" / digest
    damages = [lambda: (copy / "copied" / "sub.py").write_text("VALUE = 666\n"),
               lambda: (copy / "json.py").write_text("PLANTED = True\n"),
               lambda: (copy / "copied" / "x.py").symlink_to(tmp_path / "x")]
    for damage in damages:
        damage()
        assert Path(module_folder(elsewhere, files, digest)) == copy
        assert module_files(str(copy), ["copied"]) == files
        assert sorted(p.name for p in copy.iterdir()) == ["copied"]
        assert sorted(p.name for p in (copy / "copied").iterdir()) == ["__init__.py", "sub.py"]


def read_bytes() -> int:
    """Bytes this process has read so far (Linux's ``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_what_is_imported_is_the_sources_listed(tmp_path):
    """The files imported are the files hashed and shipped: a ``.pyc`` planted in
    ``__pycache__`` with the source's own stamp, a sourceless ``.pyc`` and a module in a
    folder without ``__init__.py`` (a namespace folder, importable too) are not run in
    place of, or beside, what :func:`module_files` lists."""
    import py_compile

    from barsweep.engine.strategies import import_strategy_module

    root = tmp_path / "project"
    folder = package(root, "stamped")
    source = folder / "real.py"
    source.write_text('WHO = "source"\n')
    fake = tmp_path / "fake.py"
    fake.write_text('WHO = "planted"\n')  # as long as the source
    stat_of = os.stat(source)
    os.utime(fake, ns=(stat_of.st_atime_ns, stat_of.st_mtime_ns))
    py_compile.compile(str(fake), cfile=str(folder / "__pycache__" / (
        f"real.{sys.implementation.cache_tag}.pyc")), doraise=True)
    py_compile.compile(str(fake), cfile=str(folder / "ghost.pyc"), doraise=True)
    (folder / "space").mkdir()
    (folder / "space" / "inner.py").write_text("DEEP = 1\n")
    listed = module_files(str(root), ["stamped"])
    assert "stamped/space/inner.py" in listed and not any(n.endswith(".pyc") for n in listed)
    import_strategy_module("stamped.real", root)
    assert sys.modules["stamped.real"].WHO == "source"
    with pytest.raises(SpecError):
        import_strategy_module("stamped.ghost", root)
    import_strategy_module("stamped.space.inner", root)
    assert sys.modules["stamped.space.inner"].DEEP == 1
    before = files_digest(listed)
    (folder / "space" / "inner.py").write_text("DEEP = 2\n")
    assert files_digest(module_files(str(root), ["stamped"])) != before


def test_a_package_linked_from_elsewhere_is_refused(tmp_path):
    """The package folder itself a link out of ``module_dir``: refused naming it."""
    elsewhere = package(tmp_path / "elsewhere", "linked")
    (elsewhere / "secret_conf.py").write_text("TOKEN = 'x'\n")
    root = tmp_path / "project"
    root.mkdir()
    (root / "linked").symlink_to(elsewhere)
    with pytest.raises(DataError, match=f"{root / 'linked'} is a symbolic link to"):
        ModuleShipper(str(root), ["linked"])
