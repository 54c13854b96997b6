"""Sweep specs: parsing, every refusal naming its key, round trips, grids, examples."""

import copy
import datetime as dt
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import barsweep.pipeline
from barsweep.engine import Execution
from barsweep.engine.core.execution import execution_of
from barsweep.engine.strategies import Param, Strategy, register
from barsweep.errors import SpecError
from barsweep.pipeline.config.model import (
    ClusterSpec,
    RangeSpec,
    RunSpec,
    Spec,
    load_spec,
    parse_spec,
)

EXAMPLES = Path(barsweep.pipeline.__file__).parent / "examples"

# a strategy with an int and a bounded float parameter, for what the builtins lack
register(
    Strategy(
        name="_test_spec_stops",
        params=(Param("window", "int", 2, None), Param("stop", "float", 0.0, 0.5)),
        indicators=(),
        kernel=None,
    )
)

BASE = {
    "data": {"store": "bars/", "symbols": ["BTCUSDT"], "timeframe": "1h"},
    "strategy": "ema_cross",
    "grid": {"fast": {"start": 2, "stop": 10, "step": 1}, "slow": [10, 20, 30]},
    "constraints": ["fast < slow"],
}


def spec_with(**changes):
    """BASE with dotted keys set (value None deletes the key)."""
    spec = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return spec


def refused(spec, source="<string>"):
    with pytest.raises(SpecError) as info:
        parse_spec(spec, source=source)
    return str(info.value)


# --------------------------------------------------------------------------- accepted


def test_defaults():
    spec = parse_spec(BASE)
    assert spec.execution == Execution()
    assert spec.execution.fill == "next_open" and spec.execution.fees == 0.0
    assert spec.execution.init_cash == 10_000.0 and spec.execution.direction == "long"
    assert spec.run == RunSpec() and spec.run.block_size == "auto"
    assert spec.run.backend == "auto" and spec.run.out == os.path.abspath("results.zarr")
    assert spec.cluster == ClusterSpec(kind="auto") and spec.n_workers is None
    assert spec.cluster.dashboard == "127.0.0.1:8787"
    assert spec.data.year_days is None and spec.data.start is None  # measured at prepare


def test_single_symbol_becomes_a_list():
    assert parse_spec(spec_with(data__symbols="ETHUSDT")).data.symbols == ["ETHUSDT"]


def test_dates_and_datetimes():
    spec = parse_spec(spec_with(data__start=dt.date(2021, 1, 1), data__end="2022-06-30T12:00:00Z"))
    assert spec.data.start == "2021-01-01" and spec.data.end == "2022-06-30T12:00:00Z"
    text = "data: {store: b, symbols: X, timeframe: 1d, start: 2021-01-01}\nstrategy: buy_and_hold"
    assert parse_spec(text).data.start == "2021-01-01"


def test_grid_is_ordered_and_typed_as_the_strategy_declares():
    spec = parse_spec(spec_with(grid={"slow": [10.0, 20], "fast": [2.0, 3]}))
    assert list(spec.grid) == ["fast", "slow"]
    assert spec.grid["slow"] == [10, 20] and all(type(v) is int for v in spec.grid["slow"])
    grid = spec.param_grid
    assert grid.names == ("fast", "slow")
    assert grid.values("fast").dtype == np.int64


def test_float_parameter():
    spec = parse_spec(
        spec_with(
            strategy="_test_spec_stops",
            grid={"window": [5], "stop": {"start": 0.1, "stop": 0.5, "step": 0.1}},
            constraints=["stop * window <= 2"],
        )
    )
    assert spec.grid["stop"] == RangeSpec(start=0.1, stop=0.5, step=0.1)
    grid = spec.param_grid
    assert grid.values("stop").dtype == np.float64
    np.testing.assert_array_equal(grid.values("stop"), [0.1, 0.2, 0.3, 0.4, 0.5])
    assert grid.count_valid() == 4


def test_scheduler_addresses_and_workers():
    for address in (
        "local",
        "cuda",
        "tcp://10.0.0.5:8786",
        "tls://sched.example.org:8786",
        "tcp://[::1]:8786",
        "ucx://gpu-node",
    ):
        cluster = parse_spec(spec_with(cluster=address)).cluster
        assert cluster.describe() == address
        assert cluster.kind == (address if address in ("local", "cuda") else "scheduler")
    assert parse_spec(spec_with(n_workers=4)).n_workers == 4


def test_empty_sections_take_defaults():
    text = (
        "data: {store: b, symbols: [X], timeframe: 4h}\n"
        "strategy: buy_and_hold\ngrid:\nconstraints:\nexecution:\nrun:\n"
    )
    spec = parse_spec(text)
    assert spec.grid == {} and spec.constraints == [] and spec.run == RunSpec()


def test_spec_is_frozen_and_picklable():
    spec = parse_spec(BASE)
    with pytest.raises(ValueError):
        spec.strategy = "buy_and_hold"
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_to_yaml_round_trips():
    spec = parse_spec(
        spec_with(
            data__start="2021-01-01",
            execution={"fill": "close", "fees": 0.001, "slippage": 0.0005},
            run={"block_size": 1000, "out": "x.zarr", "backend": "cpu"},
            cluster="tcp://h:8786",
        )
    )
    text = spec.to_yaml()
    assert parse_spec(text) == spec
    assert parse_spec(text).param_grid == spec.param_grid


def test_param_grid():
    grid = parse_spec(BASE).param_grid
    assert grid.shape == (9, 3)
    assert grid.values("fast").tolist() == list(range(2, 11))
    assert [c.text for c in grid.constraints] == ["fast < slow"]
    assert grid.count_valid() == 9 * 3 - 1  # all but fast=10, slow=10


@pytest.mark.parametrize("name", ["ema_cross.yaml", "buy_and_hold.yaml"])
def test_examples_load(name):
    spec = load_spec(EXAMPLES / name)
    assert parse_spec(spec.to_yaml()) == spec
    grid = spec.param_grid
    assert grid.count_valid() >= 1


def test_ema_cross_example():
    spec = load_spec(EXAMPLES / "ema_cross.yaml")
    grid = spec.param_grid
    assert grid.names == ("fast", "slow")
    assert grid.values("fast")[[0, -1]].tolist() == [2, 50]
    assert grid.values("slow")[[0, -1]].tolist() == [10, 200]
    assert spec.execution.fill == "close" and spec.execution.fees == 0.001
    assert spec.run.block_size == 4096 and spec.run.out == str(EXAMPLES / "results.zarr")
    assert spec.data.store == str(EXAMPLES / "bars")
    assert grid.chunks(spec.run.block_size) == (42, 96)


def test_buy_and_hold_example_has_one_combo():
    grid = load_spec(EXAMPLES / "buy_and_hold.yaml").param_grid
    assert grid.shape == () and grid.size == 1
    assert list(grid.blocks(grid.chunks(4096))) == [(0, ())]


# --------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"run__blocksize": 4096}, "run.blocksize: Extra inputs are not permitted"),
        ({"data__symbol": "X"}, "data.symbol: Extra inputs are not permitted"),
        ({"grid__fast": {"start": 2, "stop": 9, "step": 1, "num": 3}}, "grid.fast.num: Extra"),
        ({"run__block_size": "big"}, "run.block_size: Input should be a valid integer"),
        ({"run__block_size": 0}, "run.block_size: Input should be greater than 0"),
        ({"execution__fees": -0.1}, "execution.fees: Input should be greater than or equal to 0"),
        ({"execution__fees": 1.5}, "execution.fees: Input should be less than 1"),
        ({"execution__fees": "0.1"}, "execution.fees: Input should be a valid number"),
        ({"execution__slippage": float("nan")}, "execution.slippage"),
        ({"execution__init_cash": 0}, "execution.init_cash"),
        ({"execution__fill": "open"}, "execution.fill"),
        ({"execution__direction": "sideways"}, "execution.direction"),
        ({"run__backend": "gpu"}, "run.backend"),
        ({"data__timeframe": "1hour"}, "data.timeframe"),
        ({"data__timeframe": "0h"}, "data.timeframe"),
        ({"data__symbols": []}, "data.symbols"),
        ({"data__symbols": ["X", "X"]}, "data.symbols"),
        ({"data__store": None}, "data.store: Field required"),
        ({"data__year_days": 0}, "data.year_days"),
        ({"data__start": "last year"}, "data.start"),
        ({"data__start": "2022-01-01", "data__end": "2021-01-01"}, "data.end"),
        ({"strategy": None}, "strategy: Field required"),
        ({"strategy": "ema_crossover"}, "strategy: unknown strategy 'ema_crossover'"),
        ({"grid__fast": "2..50"}, "grid.fast: Input should be a list of numbers or a range"),
        ({"grid__fast": [2, "3"]}, "grid.fast[1]: Input should be a number"),
        ({"grid__fast": [2, True]}, "grid.fast[1]: Input should be a number"),
        ({"grid__fast": {"start": 2, "stop": 9}}, "grid.fast.step: Field required"),
        ({"grid__fast": []}, "grid.fast: the list of values is empty"),
        ({"grid__fast": [2, 3, 2]}, "grid.fast: value 2 is given more than once"),
        ({"grid__fast": {"start": 9, "stop": 2, "step": 1}}, "grid.fast: start must be <= stop"),
        ({"grid__fast": {"start": 2, "stop": 9, "step": 0}}, "grid.fast: step must be > 0"),
        ({"grid__fast": [1, 2]}, "grid.fast: fast must be >= 2, got 1"),
        ({"grid__fast": [2.5, 3]}, "grid.fast: fast must be an integer, got 2.5"),
        ({"grid__fats": [2, 3]}, "grid.fats: strategy 'ema_cross' has no parameter 'fats'"),
        ({"grid__slow": None}, "grid.slow: missing"),
        ({"constraints": ["fats < slow"]}, "constraints[0]: unknown name 'fats'"),
        ({"constraints": ["fast < slow", "fast <"]}, "constraints[1]: cannot parse"),
        ({"constraints": ["fast + 1"]}, "constraints[0]: cannot parse"),
        ({"constraints": "fast < slow"}, "constraints: Input should be a valid list"),
        ({"constraints": ["fast > slow"]}, "constraints: 'fast > slow' exclude every one"),
        ({"cluster": "yarn"},
         "cluster: cluster must be 'auto', 'threads', 'local', 'cuda' or a scheduler address"),
        ({"cluster": "http://host:8786"}, "cluster:"),
        ({"n_workers": 0}, "n_workers: Input should be greater than 0"),
        ({"n_workers": 2, "cluster": "tcp://h:8786"}, "n_workers: applies to clusters"),
    ],
)
def test_refusals_name_the_key(changes, expected):
    message = refused(spec_with(**changes), source="sweep.yaml")
    assert message.startswith("invalid sweep spec sweep.yaml:")
    assert expected in message, message


def test_unknown_key_lists_the_valid_ones():
    message = refused(spec_with(run__blocksize=4096))
    assert "valid keys: backend, block_size, out" in message


def test_every_failing_key_in_one_error():
    message = refused(
        spec_with(
            execution__fees=-1,
            run__blocksize=3,
            data__timeframe="hourly",
            cluster="nope",
            constraints=["fast <"],
        )
    )
    for key in ("execution.fees", "run.blocksize", "data.timeframe", "cluster", "constraints[0]"):
        assert f"\n  {key}: " in message, key


def test_grid_problems_listed_together():
    message = refused(spec_with(grid={"fast": [1], "slow": [], "stop": [1]}))
    assert "grid.fast: fast must be >= 2" in message
    assert "grid.slow: the list of values is empty" in message
    unknown = "grid.stop: strategy 'ema_cross' has no parameter 'stop'; its parameters: fast, slow"
    assert unknown in message


def test_unknown_strategy_lists_known_ones():
    message = refused(spec_with(strategy="nope"))
    assert "buy_and_hold" in message and "ema_cross" in message


def test_float_parameter_bounds():
    message = refused(
        spec_with(
            strategy="_test_spec_stops", grid={"window": [5], "stop": [0.1, 0.9]}, constraints=[]
        )
    )
    assert "grid.stop: stop must be <= 0.5, got 0.9" in message


def test_parameterless_strategy_refuses_grid_keys():
    message = refused(spec_with(strategy="buy_and_hold", constraints=[]))
    assert "grid.fast: strategy 'buy_and_hold' has no parameter 'fast'; its parameters: none" in (
        message
    )


def test_caret_survives_indentation():
    message = refused(spec_with(constraints=["fast < < slow"]))
    lines = message.splitlines()
    i = next(i for i, line in enumerate(lines) if "constraints[0]:" in line)
    text_line, caret_line = lines[i + 1], lines[i + 2]
    assert caret_line.index("^") == text_line.index("< slow")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("data: [", "not valid YAML at line 1"),
        ("strategy: a\nstrategy: b\n", "found key 'strategy' twice"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("", "the spec is empty"),
        ("spec.yaml", "load_spec"),
    ],
)
def test_yaml_refusals(text, expected):
    message = refused(text, source="s.yaml")
    assert "s.yaml" in message and expected in message


def test_load_spec_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "data: {store: b, symbols: X, timeframe: 1h}\nstrategy: ema_cross\n"
        "grid: {fast: [2], slow: [3]}\nexecution: {fees: -1}\n"
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value) and "execution.fees" in str(info.value)
    with pytest.raises(SpecError, match="missing.yaml"):
        load_spec(tmp_path / "missing.yaml")


def test_direct_construction_validates():
    with pytest.raises(ValueError):
        Spec.model_validate(spec_with(execution__fees=-1))


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"execution__direction": "sideways"}, "execution.direction"),
        ({"execution__stop_loss": 0.0}, "execution.stop_loss"),
        ({"execution__stop_loss": 1.0}, "execution.stop_loss"),
        ({"execution__trailing_stop": -0.2}, "execution.trailing_stop"),
        ({"execution__direction": "short", "execution__take_profit": 1.5},
         "execution.take_profit"),
        ({"execution__fixed_fee": -1.0}, "execution.fixed_fee"),
        ({"execution__funding": "yes"}, "execution.funding"),
        ({"grid__stop_loss": [0.01, 1.5]}, "grid.stop_loss"),
        ({"grid__stop_loss": [0.01], "execution__stop_loss": 0.02}, "execution.stop_loss"),
        ({"strategy": "rsi", "grid": {"period": [14], "lower": [80.0], "upper": [20.0]},
          "constraints": []}, "lower < upper"),
        ({"strategy": "macd", "grid": {"fast": [0], "slow": [26], "signal": [9]},
          "constraints": []}, "grid.fast"),
        ({"modules": ["not_a_module_xyz"]}, "modules[0]"),
    ],
)
def test_execution_and_strategy_refusals_name_the_key(changes, expected):
    assert expected in refused(spec_with(**changes))


def test_stops_as_grid_axes_and_strategy_requirements():
    spec = parse_spec(spec_with(grid__stop_loss=[0.01, 0.02], execution__direction="both",
                                execution__take_profit=0.1))
    grid = spec.param_grid
    assert grid.names == ("fast", "slow", "stop_loss")
    assert grid.values("stop_loss").dtype == np.float64
    rsi = parse_spec({"data": BASE["data"], "strategy": "rsi",
                      "grid": {"period": [14], "lower": [20.0, 40.0], "upper": [30.0, 70.0]}})
    combos = rsi.param_grid.combos((slice(None),) * 3)
    keep = rsi.param_grid.mask(combos)
    assert (combos["lower"][keep] < combos["upper"][keep]).all() and keep.sum() == 3


# ----------------------------------------------------- refusals: one line, naming the key


def test_spec_without_grid_names_each_parameter():
    message = refused(spec_with(grid=None), source="s.yaml")
    assert "grid.fast: missing" in message and "grid.slow: missing" in message
    assert parse_spec(spec_with(grid=None, strategy="buy_and_hold", constraints=[])).grid == {}


@pytest.mark.parametrize(
    ("axis", "problem"),
    [
        ([], "the list of values is empty; give at least one value"),
        ({"start": 2, "stop": 9, "step": 0}, "step must be > 0, got 0"),
        ([2, 3, 2], "value 2 is given more than once"),
    ],
)
def test_invalid_axis_reports_only_its_problem(axis, problem):
    # was the real problem plus a bogus "grid.fast: missing" line
    message = refused(spec_with(grid__fast=axis), source="s.yaml")
    assert message == f"invalid sweep spec s.yaml: grid.fast: {problem}"


def test_one_problem_reads_as_one_line():
    message = refused(spec_with(execution__fees=-0.1), source="s.yaml")
    assert message == ("invalid sweep spec s.yaml: execution.fees: Input should be greater "
                       "than or equal to 0 (got -0.1)")


def test_huge_grid_is_refused_up_front():
    huge = {"strategy": "macd", "constraints": [],
            "grid": {"fast": {"start": 2, "stop": 10_001, "step": 1},
                     "slow": {"start": 2, "stop": 10_001, "step": 1},
                     "signal": {"start": 1, "stop": 10_000, "step": 1}}}
    message = refused(spec_with(**huge), source="s.yaml")
    assert message == (
        "invalid sweep spec s.yaml: grid: 1,000,000,000,000 combos exceed run.max_combos "
        "(1,000,000,000); raise it with --max-combos or run.max_combos, or sample a subset "
        "(a smaller grid: a coarser step, fewer values, tighter constraints), or search "
        "it: search.method random, sobol or halving with a budget (docs/SEARCH.md)")
    two = refused(spec_with(**huge, data__symbols=["A", "B"], run={"max_combos": 10**12}))
    assert "grid: 2,000,000,000,000 combos (1,000,000,000,000 per symbol x 2 symbols)" in two
    spec = parse_spec(spec_with(**huge, run={"max_combos": 10**12}))
    assert spec.run.max_combos == 10**12
    assert spec.param_grid.size == 10**12


def test_max_combos_is_validated():
    assert parse_spec(BASE).run.max_combos == 10**9
    for bad in (0, -5, "many", 1.5, True):
        assert "run.max_combos" in refused(spec_with(run={"max_combos": bad}))


def test_overrides_merge_before_validation(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("data: {store: b, symbols: X, timeframe: 1h}\nstrategy: ema_cross\n"
                    "grid: {fast: {start: 2, stop: 100000, step: 1}, slow: [3, 4, 5]}\n"
                    "run: {block_size: 100}\n")
    assert load_spec(path).run.max_combos == 10**9
    with pytest.raises(SpecError, match=r"grid: 299,997 combos exceed run.max_combos \(1,000\)"):
        load_spec(path, overrides={"run": {"max_combos": 1000}})
    spec = load_spec(path, overrides={"run": {"out": "o.zarr", "backend": "cpu",
                                              "max_combos": None}})
    assert spec.run.out == os.path.abspath("o.zarr") and spec.run.backend == "cpu"
    assert spec.run.block_size == 100 and spec.run.max_combos == 10**9
    assert parse_spec(spec_with(run=None),
                      overrides={"run": {"out": "x"}}).run.out == os.path.abspath("x")
    message = refused_with(spec_with(), {"run": {"backend": "gpu"}})
    assert "run.backend" in message


def refused_with(spec, overrides):
    with pytest.raises(SpecError) as info:
        parse_spec(spec, overrides=overrides)
    return str(info.value)


def test_spec_reference_cluster_examples_validate(tmp_path):
    """Each `cluster:` of the Clusters section of docs/SPEC.md is a valid spec value, with
    its TLS files relative to the spec file's directory."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "SPEC.md").read_text(encoding="utf-8")
    section = page.split("## Clusters", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    entries = ["cluster:" + e for e in ("\n" + section.strip()).split("\ncluster:")[1:]]
    assert len(entries) == 8
    for name in ("ca.pem", "me.pem", "me.key"):
        (tmp_path / name).write_text("PEM")
    kinds = []
    for entry in entries:
        (tmp_path / "spec.yaml").write_text(
            "data: {store: bars/, symbols: [X], timeframe: 1h}\nstrategy: buy_and_hold\n"
            + entry + "\n")
        cluster = load_spec(tmp_path / "spec.yaml").cluster
        kinds.append(cluster.kind)
        if cluster.security is not None and not isinstance(cluster.security, str):
            assert cluster.security.ca == str(tmp_path / "ca.pem")
    assert kinds == ["auto", "threads", "local", "local", "scheduler", "scheduler", "slurm",
                     "local"]


def test_execution_is_validated_once_when_the_spec_is_loaded(tmp_path):
    """One definition (the engine's Execution): a value only the engine used to refuse,
    init_cash <= fixed_fee, is refused when the spec is read, naming the key."""
    message = refused(spec_with(execution__init_cash=5.0, execution__fixed_fee=5.0))
    assert message == ("invalid sweep spec <string>: execution.init_cash: init_cash must be > "
                       "fixed_fee (5.0), got 5.0")
    spec = parse_spec(spec_with(execution__fees=0.001, execution__direction="both"))
    assert isinstance(spec.execution, Execution)
    assert spec.execution == Execution(fees=0.001, direction="both")
    with pytest.raises(SpecError, match=r"^execution.fees: Input should be less than 1 "):
        execution_of({"fees": 1.5})


def test_the_grid_is_built_once_per_spec(monkeypatch):
    """Validation builds the grid (its size and constraints are checked then); the run's
    plan and its blocks use that one, and build no other."""
    from barsweep.pipeline.config import grid as grid_module
    from barsweep.pipeline.run.blocks import block_combos
    from barsweep.pipeline.run.plan import plan

    built = []
    post_init = grid_module.Grid.__post_init__
    monkeypatch.setattr(grid_module.Grid, "__post_init__",
                        lambda self: built.append(self) or post_init(self))
    spec = parse_spec(spec_with(constraints=["fast < slow"], data__year_days=365))
    assert len(built) == 1 and spec.param_grid is built[0] is spec.param_grid
    the_plan = plan(spec, "out.zarr", 7)
    assert the_plan.grid is built[0] and len(the_plan.tasks) > 1
    params, keep = block_combos(the_plan.tasks[0])
    assert keep.sum() == (params["fast"] < params["slow"]).sum() > 0
    assert len(built) == 1


def test_walk_forward_and_analysis_are_validated_when_the_spec_is_loaded():
    base = {"data": {"store": "bars/", "symbols": "X", "timeframe": "1w"},
            "strategy": "ema_cross", "grid": {"fast": [2], "slow": [5]}}
    with pytest.raises(SpecError, match=r"walk_forward\.train: '1d' is 0\.143 bars of 1w"):
        parse_spec({**base, "walk_forward": {"train": "1d", "test": 5}})
    with pytest.raises(SpecError, match=r"walk_forward\.test: expected a positive number"):
        parse_spec({**base, "walk_forward": {"train": 10, "test": "6h"}})
    with pytest.raises(SpecError, match=r"analysis\.pbo_segments: .*must be even"):
        parse_spec({**base, "analysis": {"pbo_segments": 7}})
    spec = parse_spec({**base, "walk_forward": {"train": "1y", "test": "13w"}})
    assert spec.walk_forward.step == "13w" and spec.analysis.pbo_segments == 10
    assert spec.walk_forward.lengths("1w", 365.0) == (52, 13, 13)
