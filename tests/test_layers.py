"""The layers of the code (docs/LAYOUT.md): imports point one way.

``datasets <- engine <- pipeline`` over ``errors``/``version``, and inside the pipeline
``config <- run <- analysis <- (cli, api)``; the package's own ``__init__`` is the top. Two
readers check it: import-linter's contracts (pyproject.toml, on the installed package)
and an import graph read here from the tree's files with ``ast`` (every import, those
inside functions and under ``TYPE_CHECKING`` too), which also finds circles between
modules of one room.

The tests mirror the package (docs/LAYOUT.md "Tests"): a root test module is about the
repository as a whole, and what tests share comes from a package (``tests/helpers``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("datasets", "engine", "pipeline")

# rooms from the bottom up: an import may only point to a lower room or inside its own
ROOMS = ("errors", "datasets", "engine", "pipeline.config", "pipeline.run", "pipeline.analysis",
         "pipeline.face", "top")
FACES = {"barsweep.pipeline.cli", "barsweep.pipeline.api", "barsweep.pipeline"}
#: The engine's floors from the bottom up (pyproject.toml's engine contract): a room
#: imports only rooms of lower floors, never one beside it on its own floor.
ENGINE_FLOORS = (("indicators", "expr", "cache"), ("core",), ("strategies", "analysis"),
                 ("portfolio", "rules"), ("gpu",), ("dispatch", "backend"),
                 ("warm", "backtest"))


def module_files() -> dict[str, Path]:
    """``barsweep.x.y`` -> its file, for every module of the package in the tree."""
    found = {"barsweep": ROOT / "__init__.py", "barsweep.errors": ROOT / "errors.py",
             "barsweep.version": ROOT / "version.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join(("barsweep", *parts))] = path
    return found


def room(module: str) -> str:
    if module in ("barsweep.errors", "barsweep.version"):
        return "errors"
    if module == "barsweep":
        return "top"
    if module in FACES or module.startswith("barsweep.pipeline.cli."):
        return "pipeline.face"
    parts = module.split(".")
    if parts[1] == "pipeline":
        return "pipeline." + parts[2]
    return parts[1]


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports (the deepest existing name)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                     for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def test_imports_point_down_the_rooms():
    edges = graph()
    assert len(edges) > 60 and sum(map(len, edges.values())) > 150  # the tree was read
    rank = {name: i for i, name in enumerate(ROOMS)}
    upward = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                    if rank[room(b)] > rank[room(a)])
    assert upward == []


def test_rooms_of_the_tree_are_one_way():
    """Between rooms, the graph read from the tree has one-way edges only."""
    edges = graph()
    pairs = {(room(a), room(b)) for a, targets in edges.items() for b in targets
             if room(a) != room(b)}
    assert {(b, a) for a, b in pairs} & pairs == set()
    # the layers that docs/LAYOUT.md names are all there, each used by the one above it
    for lower, upper in [("datasets", "pipeline.run"), ("engine", "pipeline.run"),
                         ("pipeline.config", "pipeline.run"),
                         ("pipeline.run", "pipeline.analysis"),
                         ("pipeline.analysis", "pipeline.face")]:
        assert (upper, lower) in pairs, (upper, lower)


def test_no_import_runs_back_up_inside_the_engine():
    """Between the engine's rooms (its folders and top modules), every import points
    to a lower floor of :data:`ENGINE_FLOORS`; ``barsweep.engine`` itself, the face,
    stands above them all."""
    floor = {name: i for i, names in enumerate(ENGINE_FLOORS) for name in names}

    def engine_room(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if parts[:2] == ["barsweep", "engine"] and len(parts) > 2 else None

    rooms = {engine_room(m) for m in module_files()} - {None}
    assert rooms == set(floor), "name each room of engine/ on a floor of ENGINE_FLOORS"
    wrong = sorted(f"{a} -> {b}" for a, targets in graph().items() for b in targets
                   if engine_room(a) and engine_room(b) and engine_room(a) != engine_room(b)
                   and floor[engine_room(b)] >= floor[engine_room(a)])
    assert wrong == []


def test_no_module_circles():
    edges = graph()
    state: dict[str, int] = {}
    circles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join(trail[trail.index(nxt):] + [node, nxt])
                               if nxt in trail else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, trail + [node])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    assert circles == []


def test_import_linter_contracts_are_kept():
    """The contracts of pyproject.toml, on the installed package."""
    cli = pytest.importorskip("importlinter.cli")
    assert cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


# --------------------------------------------------------------------------- the tests

TESTS = ROOT / "tests"
#: The packages of tests/, found on sys.path (``pythonpath`` in pyproject.toml).
TEST_PACKAGES = {"helpers", "golden"}
#: Modules of tests/ that register strategies, imported by their bare name as a user's
#: strategy module is (a spec's ``modules`` names them so).
STRATEGY_MODULES = {"custom_strategy_example", "signal_state_example", "gpu_extra_strategy",
                    "gpu_rule_strategy"}


def top_level_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of every absolute import in ``path`` (inside functions too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_tests_share_code_through_a_package():
    """What tests share is imported from a package (``helpers.compare``,
    ``golden.cases``), never from another module of tests/ by its bare name: not from a
    test module, a conftest or a script beside it (pytest puts a test's folder on
    sys.path, so such an import works, from that folder only)."""
    modules = list(TESTS.rglob("*.py"))
    assert len(modules) > 100  # the tree was read
    bare = {p.stem for p in modules} - TEST_PACKAGES - STRATEGY_MODULES - {"__init__"}
    found = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in sorted(modules)
             for line, name in top_level_imports(path) if name.split(".")[0] in bare]
    assert found == [], ("import these from tests/helpers (a package), not by bare name:\n"
                         + "\n".join(found))


def test_a_test_of_one_package_lives_in_its_folder():
    """tests/ mirrors the package: a test module at its root is about the repository as
    a whole (the docs, the layers, the packaging, CI); one whose imports of barsweep all
    come from one of datasets/, engine/, pipeline/ (and errors) belongs in that folder of
    tests/. The root's other modules are conftest.py and mutations.py (run by hand)."""
    misplaced = []
    for path in sorted(TESTS.glob("test_*.py")):
        rooms = {(name.split(".") + ["top"])[1] for _, name in top_level_imports(path)
                 if name.split(".")[0] == "barsweep"} - {"errors", "version"}
        if len(rooms) == 1 and rooms <= set(PACKAGES):
            misplaced.append(f"{path.name} -> tests/{rooms.pop()}/")
    assert misplaced == []
    assert {p.name for p in TESTS.glob("*.py")} - {p.name for p in TESTS.glob("test_*.py")} \
        == {"conftest.py", "mutations.py"}
    assert {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"} \
        >= {*PACKAGES, *TEST_PACKAGES, "gpu"}


def test_the_pipeline_imports_the_engine_through_its_faces():
    """``barsweep.engine`` or one of its folders (``barsweep.engine.core``), whose
    ``__init__`` is the face: never a module inside a folder of the engine."""
    deep = sorted(f"{a} -> {b}" for a, targets in graph().items()
                  if a.startswith("barsweep.pipeline")
                  for b in targets if b.startswith("barsweep.engine.") and b.count(".") >= 3)
    assert deep == []


def test_the_pipeline_compiles_nothing():
    """numba is the engine's: the pipeline's modules never import it (their kernels are
    the engine's, barsweep.engine.analysis)."""
    found = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                      if name.split(".")[0] == "numba"]
    assert found == []
