"""The distribution installs everything under ``barsweep`` and the tree passes ruff."""

import shutil
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def installed():
    """The installed distribution (with a RECORD), not an egg-info left in the tree."""
    found = [d for d in distributions(name="barsweep") if d.read_text("RECORD") is not None]
    assert found, "barsweep is not installed"
    return found[0]


def test_nothing_lands_top_level_but_barsweep():
    files = installed().files or []
    tops = {Path(str(f)).parts[0] for f in files}
    assert not tops & {"datasets", "engine", "pipeline"}, tops
    import barsweep.datasets
    import barsweep.engine
    import barsweep.pipeline

    for module in (barsweep.datasets, barsweep.engine, barsweep.pipeline):
        assert Path(module.__file__).parent.name in {"datasets", "engine", "pipeline"}


def test_console_script_and_examples_are_installed():
    from importlib.resources import files

    examples = files("barsweep.pipeline") / "examples"
    assert (examples / "ema_cross.yaml").is_file()
    eps = [e for e in installed().entry_points if e.group == "console_scripts"]
    assert [e.value for e in eps] == ["barsweep.pipeline.cli:command"]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_every_package_folder_of_the_tree_is_in_the_distribution():
    """Each folder with an ``__init__.py`` is listed in pyproject's ``packages`` (an editable
    install finds an unlisted one; a wheel, as CI installs it, lacks it)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    folders = {".".join(("barsweep", *init.parent.relative_to(ROOT).parts))
               for top in ("datasets", "engine", "pipeline")
               for init in (ROOT / top).rglob("__init__.py")}
    assert folders | {"barsweep"} == listed


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_ruff_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff is not None, "ruff is part of the [test] extra: pip install '.[test]'"
    result = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_package_imports_itself_relatively():
    """Tools that read the tree map ``from ..engine import sweep_block`` to the folders; an
    absolute ``barsweep.`` import inside the package they cannot."""
    absolute = []
    for path in package_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if words[:1] in (["from"], ["import"]) and words[1].split(".")[0] == "barsweep":
                absolute.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not absolute, "\n".join(absolute)


def package_files() -> list[Path]:
    """The package's source files: the root's modules and its three sub-packages."""
    root = [ROOT / name for name in ("__init__.py", "errors.py", "version.py")]
    return root + [path for folder in ("datasets", "engine", "pipeline")
                   for path in sorted((ROOT / folder).rglob("*.py"))]


#: Imports of the package that only an extra provides, each refused in one line when the
#: extra is missing (cluster kinds that need them).
OPTIONAL_IMPORTS = {"dask_cuda": "cuda", "dask_jobqueue": "hpc"}


def third_party_imports() -> dict[str, set[str]]:
    """Top-level names of the non-stdlib modules the package imports (function-local
    imports too), each with the files that import it."""
    import ast

    found: dict[str, set[str]] = {}
    for path in package_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_every_import_is_a_declared_dependency():
    """``pip install .`` gives everything the package imports (pictures and the report
    included: matplotlib is a dependency), except what an extra is declared for."""
    import re
    import tomllib
    from importlib.metadata import packages_distributions

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements):
        return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-")
                for r in requirements}

    required = names(project["dependencies"])
    extras = {k: names(v) for k, v in project["optional-dependencies"].items()}
    dists = packages_distributions()
    missing = []
    for module, files in sorted(third_party_imports().items()):
        if module in OPTIONAL_IMPORTS:
            assert OPTIONAL_IMPORTS[module] in extras, module
            continue
        owners = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not owners & required:
            missing.append(f"{module} ({', '.join(sorted(files))}): from {sorted(owners)}")
    assert not missing, "imported but not in [project] dependencies: " + "; ".join(missing)
    assert "matplotlib" in required
