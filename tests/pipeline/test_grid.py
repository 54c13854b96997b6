"""Grid axes, blocks and constraint counting."""

import itertools
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.errors import SpecError
from barsweep.pipeline.config.axes import axis_values
from barsweep.pipeline.config.expr import parse_expr
from barsweep.pipeline.config.grid import Grid


def make_grid(shape, constraints=()):
    names = "abcdefgh"[: len(shape)]
    axes = tuple((n, np.arange(k, dtype=np.int64)) for n, k in zip(names, shape, strict=True))
    return Grid(axes, tuple(parse_expr(c) for c in constraints))


# --------------------------------------------------------------------------- axis_values


def test_int_range_stop_is_inclusive():
    values = axis_values({"start": 2, "stop": 50, "step": 1})
    assert values.dtype == np.int64
    assert values[0] == 2 and values[-1] == 50 and len(values) == 49
    assert axis_values({"start": 10, "stop": 200, "step": 2})[-2:].tolist() == [198, 200]
    np.testing.assert_array_equal(axis_values({"start": 1, "stop": 6, "step": 2}), [1, 3, 5])
    np.testing.assert_array_equal(axis_values({"start": 5, "stop": 5, "step": 3}), [5])


def test_float_range_stop_is_inclusive_and_rounded():
    values = axis_values({"start": 0.1, "stop": 1.0, "step": 0.1})
    assert values.dtype == np.float64
    assert len(values) == 10
    np.testing.assert_array_equal(values, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert axis_values({"start": 0, "stop": 0.3, "step": 0.1}).tolist() == [0, 0.1, 0.2, 0.3]
    assert axis_values({"start": 0.0, "stop": 0.25, "step": 0.1}).tolist() == [0, 0.1, 0.2]


def test_range_as_object_and_kind():
    class R:
        start, stop, step = 1, 3, 1

    assert axis_values(R()).tolist() == [1, 2, 3]
    floats = axis_values(R(), kind="float")
    assert floats.dtype == np.float64 and floats.tolist() == [1.0, 2.0, 3.0]
    whole = axis_values({"start": 2.0, "stop": 6.0, "step": 2.0}, kind="int")
    assert whole.dtype == np.int64 and whole.tolist() == [2, 4, 6]


def test_lists():
    assert axis_values([5, 2, 9]).tolist() == [5, 2, 9]  # order as given
    assert axis_values([5, 2, 9]).dtype == np.int64
    assert axis_values([1, 2.5]).dtype == np.float64
    assert axis_values([1.0, 2.0], kind="int").dtype == np.int64
    assert axis_values((1, 2), kind="float").tolist() == [1.0, 2.0]
    assert axis_values(np.array([3, 4])).tolist() == [3, 4]


@pytest.mark.parametrize(
    ("value", "kind", "match"),
    [
        ([], None, "empty"),
        ([1, 2, 1], None, "more than once"),
        ([1, 1.0], None, "more than once"),
        ({"start": 1, "stop": 5, "step": 0}, None, "step must be > 0"),
        ({"start": 1, "stop": 5, "step": -1}, None, "step must be > 0"),
        ({"start": 5, "stop": 1, "step": 1}, None, "start must be <= stop"),
        ({"start": 1, "stop": 5}, None, "step"),
        ({"start": 1, "stop": 5, "step": 1, "num": 3}, None, "num"),
        ({"start": 0, "stop": 1e12, "step": 1}, None, "at most"),
        ([1, "2"], None, "number"),
        ([True, 2], None, "number"),
        ([float("nan")], None, "finite"),
        ("1, 2", None, "list of numbers"),
        (7, None, "list of numbers"),
        ([1.5, 2], "int", "integers"),
        # numbers int64/float64 cannot hold: these were OverflowError tracebacks
        ([2**63], None, "too large for int64"),
        ([-(2**70), 5], None, r"too large for int64 .*-11805"),
        ({"start": 2**70, "stop": 2**70, "step": 1}, None, "too large for int64"),
        ({"start": 2, "stop": 10**400, "step": 1}, None, r"stop=100000\.\.\.\(401 digits\)"),
        ({"start": 0.0, "stop": 1e308, "step": 1e-308}, None, "too many values"),
        ({"start": -1e308, "stop": 1e308, "step": 1e308}, None, "wider than float64"),
        ({"start": 2, "stop": 20, "step": 1e-300}, None, r"about 1.8e\+301 values"),
    ],
)
def test_axis_values_refusals(value, kind, match):
    with pytest.raises(SpecError, match=match):
        axis_values(value, kind=kind)


def test_extreme_but_valid_ranges():
    assert axis_values({"start": 1e308, "stop": 1e308, "step": 1}).tolist() == [1e308]
    assert axis_values({"start": 2, "stop": 9, "step": 10**400}).tolist() == [2]
    assert axis_values({"start": 0.01, "stop": 0.02, "step": 10**400}).tolist() == [0.01]
    assert axis_values({"start": 2**62, "stop": 2**62, "step": 1}).tolist() == [2**62]


# --------------------------------------------------------------------------- Grid basics


def test_grid_properties_and_frozen_axes():
    grid = Grid((("fast", [2, 3, 4]), ("stop", np.array([0.1, 0.2]))), (parse_expr("fast > 2"),))
    assert grid.names == ("fast", "stop")
    assert grid.shape == (3, 2) and grid.size == 6
    assert grid.values("fast").dtype == np.int64
    assert grid.values("stop").dtype == np.float64
    with pytest.raises(ValueError):
        grid.values("fast")[0] = 9
    with pytest.raises(KeyError, match="fast, stop"):
        grid.values("slow")
    clone = pickle.loads(pickle.dumps(grid))
    assert clone == grid
    assert clone != make_grid((3, 2))


@pytest.mark.parametrize(
    ("axes", "constraints", "match"),
    [
        ((("a", [1]), ("a", [2])), (), "more than once"),
        ((("a", []),), (), "non-empty"),
        ((("a", [[1, 2]]),), (), "1-D"),
        ((("a", ["x"]),), (), "numbers"),
        ((("a", [1]),), ("b < 1",), "'b'"),
    ],
)
def test_grid_refusals(axes, constraints, match):
    with pytest.raises(SpecError, match=match):
        Grid(axes, tuple(parse_expr(c) for c in constraints))


def test_combos_are_c_order():
    grid = Grid((("a", [1, 2, 3]), ("b", [10, 20]), ("c", [0.5, 1.5])))
    combos = grid.combos((slice(0, 3), slice(0, 2), slice(0, 2)))
    expected = list(itertools.product([1, 2, 3], [10, 20], [0.5, 1.5]))
    assert list(zip(combos["a"], combos["b"], combos["c"], strict=True)) == expected
    assert combos["a"].dtype == np.int64 and combos["c"].dtype == np.float64
    sub = grid.combos((slice(1, 3), slice(1, 2), slice(0, 1)))
    assert sub["a"].tolist() == [2, 3] and sub["b"].tolist() == [20, 20]
    with pytest.raises(ValueError):
        grid.combos((slice(0, 1),))


def test_mask():
    grid = make_grid((4, 4), ["a < b", "a + b != 3"])
    combos = grid.combos((slice(None), slice(None)))
    a, b = combos["a"], combos["b"]
    np.testing.assert_array_equal(grid.mask(combos), (a < b) & (a + b != 3))
    assert make_grid((4, 4)).mask(combos).all()
    assert make_grid((4, 4)).mask(combos).shape == (16,)


def test_no_parameters():
    grid = Grid(())
    assert grid.shape == () and grid.size == 1 and grid.names == ()
    assert grid.chunks(4096) == ()
    assert list(grid.blocks(grid.chunks(4096))) == [(0, ())]
    assert grid.n_blocks(()) == 1
    assert grid.combos(()) == {}
    assert grid.mask({}).tolist() == [True]
    assert grid.count_valid() == 1


def test_chunks_walk_from_last_dim():
    grid = make_grid((7, 10, 10))
    assert grid.chunks(1000) == (7, 10, 10)
    assert grid.chunks(10_000) == (7, 10, 10)
    assert grid.chunks(250) == (2, 10, 10)
    assert grid.chunks(100) == (1, 10, 10)
    assert grid.chunks(50) == (1, 5, 10)
    assert grid.chunks(5) == (1, 1, 5)
    assert grid.chunks(1) == (1, 1, 1)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(SpecError, match="block_size"):
            grid.chunks(bad)


def test_blocks_refuse_bad_chunks():
    grid = make_grid((3, 3))
    with pytest.raises(ValueError):
        list(grid.blocks((1,)))
    with pytest.raises(ValueError):
        grid.n_blocks((0, 1))


@settings(max_examples=150, deadline=None)
@given(
    shape=st.lists(st.integers(1, 7), min_size=0, max_size=4).map(tuple),
    block_size=st.integers(1, 400),
)
def test_blocks_tile_the_box_exactly_once(shape, block_size):
    grid = make_grid(shape)
    chunks = grid.chunks(block_size)
    assert len(chunks) == len(shape)
    assert all(1 <= c <= n for c, n in zip(chunks, shape, strict=True))
    assert int(np.prod(chunks)) <= block_size
    cover = np.zeros(shape, dtype=np.int64)
    blocks = list(grid.blocks(chunks))
    assert [i for i, _ in blocks] == list(range(grid.n_blocks(chunks)))
    starts = [tuple(s.start for s in index) for _, index in blocks]
    assert starts == sorted(starts)  # C order over the block grid
    for _, index in blocks:
        cover[index] += 1
        combos = grid.combos(index)
        n = int(np.prod([s.stop - s.start for s in index]))
        assert n <= block_size
        assert all(len(v) == n for v in combos.values())
    assert (cover == 1).all()


def brute_count(grid):
    count = 0
    for combo in itertools.product(*(grid.values(n) for n in grid.names)):
        env = dict(zip(grid.names, combo, strict=True))
        count += all(bool(c.evaluate(env)) for c in grid.constraints)
    return count


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple),
    constraints=st.lists(
        st.sampled_from(["a < b", "a + 1 >= c", "b != 2", "d * 2 < a + 3", "a == a"]), max_size=2
    ),
    budget=st.integers(0, 200),
)
def test_count_valid_matches_brute_force(shape, constraints, budget):
    names = "abcd"[: len(shape)]
    usable = [c for c in constraints if parse_expr(c).names <= set(names)]
    grid = make_grid(shape, usable)
    expected = brute_count(grid)
    assert grid.count_valid() == expected
    count, exact = grid.estimate_valid(budget=budget)
    assert count == expected if exact else count >= expected
    assert grid.has_valid() == (expected > 0)
    assert grid.has_valid(budget=budget) >= (expected > 0)  # True when not proven empty


def test_count_valid_of_a_huge_box_is_lazy():
    # 1e12 combos: only the two constrained axes (2000 x 2000) are ever built
    axes = tuple((n, np.arange(1000 if n in "cd" else 2000)) for n in "abcd")
    grid = Grid(axes, (parse_expr("a < b"),))
    assert grid.size == 2000 * 2000 * 1000 * 1000
    assert grid.count_valid() == (2000 * 1999 // 2) * 1000 * 1000
    assert Grid(axes).count_valid() == grid.size
    assert not Grid(axes, (parse_expr("a < 0"),)).has_valid()


def test_auto_block_size():
    from barsweep.pipeline.run.plan import MAX_BLOCK_COMBOS, auto_block_size

    assert auto_block_size(1_000_000, 26_280, 2) == 125_000          # 4 blocks per worker
    assert auto_block_size(4_000, 26_280, 2) == 2_000      # >= 5e7 combo-bars, 1 per worker
    assert auto_block_size(5_000, 26_280, 2) == 2_500      # 3 -> 2 blocks: as many each
    assert auto_block_size(500, 26_280, 2) == 250          # both workers busy
    assert auto_block_size(10**8, 26_280, 2) == MAX_BLOCK_COMBOS
    assert auto_block_size(1_000, 1_000_000, 2) == 125               # 4 blocks per worker
    assert auto_block_size(1, 10, 8) == 1


# --------------------------------------------------------------------------- sizes, lazily


def _peak_mib(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_counting_a_huge_constrained_grid_does_not_enumerate():
    # 10^12 combos whose constraint reads 10^10 of them: enumerating the 10^10 would take
    # minutes and GBs; interval bounds settle most of the box
    n = 100_000
    axes = (("fast", np.arange(1, n + 1)), ("slow", np.arange(1, n + 1)),
            ("stop", np.arange(100) / 1000))
    grid = Grid(axes, (parse_expr("fast < slow"),))
    count, peak = _peak_mib(grid.count_valid)
    assert count == n * (n - 1) // 2 * 100
    assert peak < 200
    assert grid.has_valid()
    assert not Grid(axes, (parse_expr("fast > slow + 200000"),)).has_valid()


CONSTRAINTS = ["a < b", "a + 1 >= c", "b != 2", "d * 2 < a + 3", "a == a", "a * b <= c * 3",
               "a / b > 0.5", "not (a < c or b >= 4)", "a - b == c", "-a < b < c",
               "a / (b - 2) < 1", "b * 1e20 > c", "a * 9007199254740993 != b"]


@st.composite
def any_axis(draw):
    """Axis values: sorted, reversed, shuffled, ints or floats, negatives included."""
    n = draw(st.integers(1, 9))
    values = draw(st.lists(st.integers(-6, 12), min_size=n, max_size=n, unique=True))
    order = draw(st.sampled_from(["up", "down", "any"]))
    if order != "any":
        values = sorted(values, reverse=order == "down")
    if draw(st.booleans()):
        return np.array(values, dtype=np.float64) / 2
    return np.array(values, dtype=np.int64)


@settings(max_examples=120, deadline=None)
@given(
    columns=st.lists(any_axis(), min_size=1, max_size=4),
    constraints=st.lists(st.sampled_from(CONSTRAINTS), max_size=2),
    block_size=st.integers(1, 60),
    budget=st.sampled_from([0, 30, 300, None]),
)
def test_block_counts_and_classify_agree_with_the_mask(columns, constraints, block_size,
                                                       budget):
    names = "abcd"[: len(columns)]
    usable = [parse_expr(c) for c in constraints if parse_expr(c).names <= set(names)]
    grid = Grid(tuple(zip(names, columns, strict=False)), tuple(usable))
    chunks = grid.chunks(block_size)
    counts, exact = grid.block_counts(chunks, budget=budget)
    assert counts.dtype == np.int64 and len(counts) == grid.n_blocks(chunks)
    if budget is None:
        assert exact.all()
    total = 0
    for block_id, index in grid.blocks(chunks):
        keep = grid.mask(grid.combos(index))
        truth = int(keep.sum())
        total += truth
        if exact[block_id]:
            assert counts[block_id] == truth
        else:
            assert keep.size >= counts[block_id] >= truth
        decided = grid.classify(index)
        assert decided is None or keep.all() == decided and keep.any() == decided
    assert grid.count_valid() == total
    assert grid.has_valid() == (total > 0)


def test_classify_sub_boxes():
    grid = Grid((("fast", np.arange(2, 50)), ("slow", np.arange(10, 200))),
                (parse_expr("fast < slow"),))
    assert grid.classify((slice(0, 8), slice(0, 190))) is True       # fast <= 9 < slow
    assert grid.classify((slice(40, 48), slice(0, 5))) is False      # fast >= 42 > slow
    assert grid.classify((slice(None), slice(None))) is None
    assert make_grid((3, 3)).classify((slice(0, 3), slice(1, 2))) is True
    with pytest.raises(ValueError):
        grid.classify((slice(0, 1),))
    with pytest.raises(ValueError):
        grid.classify((slice(0, 4, 2), slice(0, 1)))


def test_interval_bounds_of_unsorted_long_axes():
    from barsweep.pipeline.config.count import _AxisBounds, _reduce_ranges

    rng = np.random.default_rng(3)
    values = rng.permutation(200).astype(np.int64)
    start = rng.integers(0, 199, 500)
    stop = np.minimum(start + rng.integers(1, 90, 500), 200)
    lo, hi = _reduce_ranges(values, start, stop)
    table_lo, table_hi = _AxisBounds(values).of(start, stop)
    for i in range(500):
        piece = values[start[i]:stop[i]]
        assert lo[i] == table_lo[i] == piece.min() and hi[i] == table_hi[i] == piece.max()


def test_budget_gives_an_upper_bound_and_has_valid_lets_unknown_through():
    # dividing by b - b (an interval around 0) leaves every box undecided by its bounds;
    # point by point a / 0 is inf or NaN, never < 1: no combo is valid
    axes = (("a", np.arange(1000)), ("b", np.arange(1000)))
    grid = Grid(axes, (parse_expr("a / (b - b) < 1"),))
    count, exact = grid.estimate_valid(budget=10_000)
    assert not exact and 0 < count <= grid.size
    assert grid.has_valid(budget=10_000)             # not proven empty: let through
    assert not grid.has_valid(budget=None)           # proven, by enumerating it all
    assert grid.count_valid() == 0
    assert Grid(axes, (parse_expr("a * a == b + 1"),)).count_valid() == 31  # a = 1..31


def test_counting_refuses_an_uncountable_grid():
    axes = tuple((n, np.arange(1_000_000)) for n in "abcd")
    with pytest.raises(SpecError, match="more than can be counted"):
        Grid(axes, (parse_expr("a < b"),)).count_valid()
