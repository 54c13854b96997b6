"""Generated bad specs: wrong types, unknown keys, empty or missing grids, huge grids, bad
paths, nonsense strings. Each spec is valid or refused with one SpecError; through the
CLI (in process) a refused spec prints one ``barsweep: error:`` line, no traceback, starts
no cluster and writes nothing."""

import contextlib
import copy
import io
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import Spec, load_spec, parse_spec

BASE = {
    "data": {"store": "STORE", "symbols": ["BTCUSDT"], "timeframe": "1h"},
    "strategy": "ema_cross",
    "grid": {"fast": {"start": 2, "stop": 20, "step": 2}, "slow": [10, 30, 50]},
    "constraints": ["fast < slow"],
    "execution": {"fill": "close", "fees": 0.001},
    "run": {"block_size": 64, "out": "results.zarr"},
}

NONSENSE = st.sampled_from([
    "", " ", "1h", "0h", "auto", "fast < slow", "fast <", "fast = slow", "__import__('os')",
    "tcp://", "tcp://host:99999", "../..", "/proc/x", "nan", "inf", "1e12", "∞", "ema_cross",
    "yes", "null", "~", "2021-13-45", "\x00", "a" * 300, "{start: 1}", "[1, 2]",
])
SCALARS = st.one_of(
    st.none(), st.booleans(), NONSENSE, st.text(max_size=12),
    st.integers(-(10**6), 10**6), st.sampled_from([0, -1, 2**31, 2**63, -(2**70), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.dates(),
)
JUNK = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.sampled_from(["start", "stop", "step", "num", "store", "x"]), SCALARS,
                    max_size=4),
)
EDGE_NUMBERS = st.sampled_from([
    0, 1, 2, 3, -1, 0.5, 2**53 + 1, 2**62, 2**63, -(2**70), 10**30, 1e308, -1e308, 1e-308,
    5e-324, float("nan"), float("inf"),
])
EDGE_AXIS = st.one_of(
    st.lists(EDGE_NUMBERS, min_size=1, max_size=3),
    st.fixed_dictionaries({"start": EDGE_NUMBERS, "stop": EDGE_NUMBERS, "step": EDGE_NUMBERS}),
)
HUGE_AXIS = st.builds(
    lambda start, stop, step: {"start": start, "stop": stop, "step": step},
    st.sampled_from([2, 3, 1, 0]),
    st.sampled_from([100_000, 99_999, 10**6, 10**9, 10**30, 2**63]),
    st.sampled_from([1, 2, 0.5, 1e-9, 1e-300]),
)
HUGE_GRIDS = st.one_of(
    st.fixed_dictionaries({"fast": HUGE_AXIS, "slow": HUGE_AXIS}),
    st.fixed_dictionaries({"fast": HUGE_AXIS, "slow": HUGE_AXIS,
                           "stop_loss": st.lists(st.sampled_from([0.01, 0.02, 0.05, 0.1]),
                                                 min_size=1, max_size=4, unique=True)}),
    st.fixed_dictionaries({"fast": st.just([]), "slow": HUGE_AXIS}),
    st.just({}), st.none(),
)
CONSTRAINTS = st.lists(st.sampled_from([
    "fast < slow", "fast > slow", "fast * fast < slow", "fast / (slow - slow) < 1",
    "slow - fast >= 10 and fast != 3", "not fast < slow", "fast < slow < 1e300", "fast < < slow",
    "stop_loss < 0.05", "1 < 2", "fast +", "bogus > 1",
]), max_size=3)
# where a mutation lands: a section, a key in it, or a key of a grid axis
PATHS = st.sampled_from([
    ("data",), ("data", "store"), ("data", "symbols"), ("data", "timeframe"), ("data", "start"),
    ("data", "end"), ("data", "year_days"), ("strategy",), ("grid",), ("grid", "fast"),
    ("grid", "slow"), ("grid", "fast", "start"), ("grid", "fast", "stop"),
    ("grid", "fast", "step"), ("constraints",), ("execution",), ("execution", "fees"),
    ("execution", "fill"), ("execution", "direction"), ("execution", "stop_loss"), ("run",),
    ("run", "block_size"), ("run", "out"), ("run", "backend"), ("run", "max_combos"),
    ("run", "worker_timeout"), ("cluster",), ("n_workers",), ("modules",), ("colour",),
])
MUTATIONS = st.one_of(
    st.tuples(st.just("set"), PATHS, JUNK),
    st.tuples(st.just("delete"), PATHS, st.none()),
    st.tuples(st.just("unknown"), PATHS, SCALARS),
    st.tuples(st.just("set"), st.just(("grid",)), HUGE_GRIDS),
    st.tuples(st.just("set"), st.just(("constraints",)), CONSTRAINTS),
    st.tuples(st.just("set"), st.sampled_from([("grid", "fast"), ("grid", "slow"),
                                               ("grid", "stop_loss")]), EDGE_AXIS),
    st.tuples(st.just("set"), st.just(("strategy",)),
              st.sampled_from(["macd", "rsi", "buy_and_hold", "EMA_CROSS", "ema-cross"])),
    st.tuples(st.just("set"), st.just(("data", "store")),
              st.sampled_from(["STORE", "MISSING", "FILE", "/proc/nothere", "/proc/self",
                               "STORE/1h/BTCUSDT.arrow", "", "\x00"])),
    st.tuples(st.just("set"), st.just(("run", "out")),
              st.sampled_from(["r.zarr", "", "/proc/x.zarr", "FILE", "FILE/r.zarr", "STORE",
                               ".", "sub/dir/r.zarr"])),
    st.tuples(st.just("set"), st.just(("modules",)),
              st.sampled_from([["zz_no_such_module_9"], [1], "x", {}, [""], ["."]])),
)


def mutate(spec: dict, mutations) -> dict:
    spec = copy.deepcopy(spec)
    for action, path, value in mutations:
        node = spec
        for key in path[:-1]:
            child = node.get(key) if isinstance(node, dict) else None
            if not isinstance(child, dict):
                break
            node = child
        else:
            last = path[-1]
            if action == "set":
                node[last] = value
            elif action == "delete":
                node.pop(last, None)
            else:
                target = node.get(last) if len(path) > 1 else spec
                if isinstance(target, dict):
                    target["unknown_key"] = value
    return spec


def with_paths(spec, places: dict):
    """`spec` with the placeholders STORE, MISSING, FILE replaced by real paths."""
    if isinstance(spec, dict):
        return {k: with_paths(v, places) for k, v in spec.items()}
    if isinstance(spec, list):
        return [with_paths(v, places) for v in spec]
    if isinstance(spec, str):
        for name, path in places.items():
            spec = spec.replace(name, path)
    return spec


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("bars")
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars", "300",
                 "--store", str(path)]) == 0
    return path


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


class ClusterStarted(Exception):
    """Raised in place of starting or reaching a cluster."""


def run_cli(argv: list[str]) -> tuple[int | str, str]:
    """``main(argv)`` in process with the cluster replaced: its exit status (or
    ``"cluster"`` when it got as far as the cluster) and its stderr."""
    err, out = io.StringIO(), io.StringIO()
    with (mock.patch("barsweep.pipeline.run.cluster.connect", side_effect=ClusterStarted),
          contextlib.redirect_stderr(err), contextlib.redirect_stdout(out)):
        try:
            rc = main(argv)
        except ClusterStarted:
            rc = "cluster"
    return rc, err.getvalue()


def check_one_line_refusal(rc, err: str) -> None:
    assert rc == 2, err
    assert "Traceback" not in err, err
    assert err.count("barsweep: error:") == 1 and err.startswith("barsweep: error:"), err


@settings(max_examples=150, deadline=None)
@given(st.lists(MUTATIONS, min_size=1, max_size=3))
def test_generated_specs_are_valid_or_refused(mutations):
    spec = mutate(BASE, mutations)
    try:
        parsed = parse_spec(spec, source="fuzz.yaml")
    except SpecError as err:
        assert str(err).startswith("invalid sweep spec fuzz.yaml:")
        return
    assert isinstance(parsed, Spec)
    assert parse_spec(parsed.to_yaml()) == parsed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MUTATIONS, min_size=1, max_size=3))
def test_generated_specs_through_the_cli(store, mutations):
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        root = Path(tmp)
        (root / "afile").write_text("not a store\n")
        places = {"STORE": str(store), "MISSING": str(root / "missing"),
                  "FILE": str(root / "afile")}
        spec = with_paths(mutate(BASE, mutations), places)
        path = root / "spec.yaml"
        path.write_text(yaml.safe_dump(spec, allow_unicode=True))
        before, bars_before = snapshot(root), snapshot(store)
        try:
            load_spec(path)
            valid = True
        except SpecError:
            valid = False
        rc, err = run_cli(["run", str(path), "--no-progress"])
        if not valid or rc != "cluster":
            check_one_line_refusal(rc, err)
        if not valid:
            assert "invalid sweep spec" in err or "cannot read sweep spec" in err, err
        assert snapshot(root) == before
        assert snapshot(store) == bars_before


@pytest.mark.parametrize("text", [
    "grid: [",                                   # not YAML
    "- a\n- b\n",                                # not a mapping
    "",                                          # empty
    "data: {store: x, symbols: X, timeframe: 1h}\nstrategy: ema_cross\n",   # no grid
    "data: {store: x, symbols: X, timeframe: 1h}\nstrategy: ema_cross\n"
    "grid: {fast: [], slow: [3]}\n",             # an empty axis
    "data: {store: x, symbols: X, timeframe: 1h}\nstrategy: ema_cross\n"
    "grid: {fast: {start: 2, stop: 100000, step: 1}, slow: {start: 2, stop: 100000, step: 1}}\n"
    "run: {max_combos: 1000}\n",                 # too many combos
    "data: {store: x, symbols: X, timeframe: 1h}\nstrategy: macd\n"
    "grid: {fast: {start: 2, stop: 10001, step: 1}, slow: {start: 2, stop: 10001, step: 1},"
    " signal: {start: 1, stop: 10000, step: 1}}\n",   # 10^12 combos
])
def test_refused_spec_files_through_the_cli(tmp_path, text, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    before = snapshot(tmp_path)
    rc, err = run_cli(["run", str(path)])
    check_one_line_refusal(rc, err)
    assert str(path) in err
    assert snapshot(tmp_path) == before


def test_max_combos_flag(tmp_path, store, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(with_paths(copy.deepcopy(BASE), {"STORE": str(store)})))
    rc, err = run_cli(["run", str(path), "--max-combos", "10"])
    check_one_line_refusal(rc, err)
    assert "grid: 30 combos exceed run.max_combos (10); raise it with --max-combos" in err
    assert run_cli(["run", str(path), "--max-combos", "30"])[0] == "cluster"
    rc, err = run_cli(["run", str(path), "--max-combos", "0"])
    check_one_line_refusal(rc, err)
    assert "run.max_combos" in err
    assert not (tmp_path / "results.zarr").exists()


@pytest.mark.parametrize("where", ["missing", "afile", "/proc/nothere", "/proc/self",
                                   "nul\x00byte"])
def test_bad_store_paths_refused_before_the_cluster(tmp_path, where, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    spec = copy.deepcopy(BASE)
    spec["data"]["store"] = where
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    before = snapshot(tmp_path)
    rc, err = run_cli(["run", str(path)])
    check_one_line_refusal(rc, err)
    assert snapshot(tmp_path) == before

