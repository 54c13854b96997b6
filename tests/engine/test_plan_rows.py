"""The block's indicator rows (``plan_rows``) and the kernel's combo order
(``locality_order``) against their obvious versions: ``np.unique(axis=0)`` per slot and
``np.lexsort``, on random grids."""

import numpy as np
import pytest

from barsweep.engine import get_strategy
from barsweep.engine.core.hoist import dense_codes, plan_rows, unique_rows
from barsweep.engine.core.inputs import lane_order, locality_order


def plan_rows_reference(strategy, params, n_combos):
    """plan_rows as first written: each slot's distinct argument rows by np.unique."""
    rows = np.empty((n_combos, len(strategy.indicators)), dtype=np.int64)
    index: dict[tuple, int] = {}
    for slot, spec in enumerate(strategy.indicators):
        if not spec.params:
            rows[:, slot] = index.setdefault((spec.name, ()), len(index))
            continue
        args = np.column_stack([np.asarray(params[p]) for p in spec.params])
        distinct, inverse = np.unique(args, axis=0, return_inverse=True)
        slot_rows = np.empty(len(distinct), dtype=np.int64)
        for j, values in enumerate(distinct):
            call = tuple(int(v) if strategy.param(name).kind == "int" else float(v)
                         for name, v in zip(spec.params, values))
            slot_rows[j] = index.setdefault((spec.name, call), len(index))
        rows[:, slot] = slot_rows[inverse.reshape(-1)]
    return list(index), rows


def locality_reference(rows, sign=-1):
    """locality_order as first written: a lexsort, the slot with most distinct rows first
    (``sign=1``: lane_order's, the slot with the fewest first)."""
    if rows.shape[1] == 0 or rows.shape[0] < 2:
        return np.arange(rows.shape[0])
    distinct = [len(np.unique(rows[:, k])) for k in range(rows.shape[1])]
    keys = sorted(range(rows.shape[1]), key=lambda k: sign * distinct[k])
    return np.lexsort(tuple(rows[:, k] for k in reversed(keys)))


def random_grid(rng, strategy, n):
    """``n`` combos drawn from a random product of the strategy's axes, shuffled."""
    axes = {}
    for p in strategy.params:
        size = int(rng.integers(1, 40))
        if p.kind == "int":
            start = int(rng.integers(-5, 3000))
            axes[p.name] = start + np.sort(rng.choice(np.arange(size * 3), size, replace=False))
        else:
            axes[p.name] = np.round(rng.normal(0.0, 2.0, size), int(rng.integers(0, 4)))
    pick = rng.integers(0, np.prod([len(a) for a in axes.values()]), n)
    mesh = np.unravel_index(pick, [len(a) for a in axes.values()])
    return {name: axis[m] for (name, axis), m in zip(axes.items(), mesh)}


@pytest.mark.parametrize("name", ["ema_cross", "bollinger", "macd", "trix", "rsi", "donchian"])
def test_plan_rows_equals_np_unique(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    strategy = get_strategy(name)
    for n in (1, 2, 37, 5000):
        params = random_grid(rng, strategy, n)
        keys, rows = plan_rows(strategy, params, n)
        ref_keys, ref_rows = plan_rows_reference(strategy, params, n)
        assert keys == ref_keys
        assert [type(a) for _, args in keys for a in args] == \
            [type(a) for _, args in ref_keys for a in args]
        np.testing.assert_array_equal(rows, ref_rows)


@pytest.mark.parametrize("kinds", ["i", "f", "if", "iii", "fi", "u", "b", "sparse"])
def test_unique_rows_equals_np_unique(kinds):
    rng = np.random.default_rng(len(kinds) * 7 + ord(kinds[0]))
    for n in (0, 1, 3, 1000):
        columns = []
        for kind in kinds:
            if kind == "i":
                columns.append(rng.integers(-50, 50, n))
            elif kind == "u":
                columns.append(rng.integers(0, 9, n).astype(np.uint16))
            elif kind == "b":
                columns.append(rng.random(n) < 0.5)
            elif kind == "sparse":  # integers far wider than their count: hashed
                columns.append(rng.choice([-(2 ** 62), 0, 7, 2 ** 61], n))
            else:
                columns.append(rng.choice([-1.5, 0.25, 3.0, 1e300, -2e-300], n))
        distinct, inverse = unique_rows(columns)
        ref, ref_inverse = np.unique(np.column_stack(columns), axis=0, return_inverse=True)
        assert distinct.dtype == ref.dtype
        np.testing.assert_array_equal(distinct, ref)
        np.testing.assert_array_equal(inverse, ref_inverse.reshape(-1))


def test_dense_codes_of_a_wide_product_key():
    """Keys combining many columns grow past the counted range and are hashed instead."""
    rng = np.random.default_rng(3)
    columns = [rng.integers(0, 200, 3000) for _ in range(5)]  # 200**5 possible keys
    distinct, inverse = unique_rows(columns)
    ref, ref_inverse = np.unique(np.column_stack(columns), axis=0, return_inverse=True)
    np.testing.assert_array_equal(distinct, ref)
    np.testing.assert_array_equal(inverse, ref_inverse.reshape(-1))
    values, codes = dense_codes(np.array([5, 3, 5, 9]))
    assert values.tolist() == [3, 5, 9] and codes.tolist() == [1, 0, 1, 2]


@pytest.mark.parametrize("n_slots", [0, 1, 2, 3])
def test_locality_order_equals_lexsort(n_slots):
    rng = np.random.default_rng(n_slots)
    for n in (0, 1, 2, 50, 4000):
        high = rng.integers(1, 300, n_slots)
        rows = np.empty((n, n_slots), dtype=np.int64)
        for k, h in enumerate(high):
            rows[:, k] = rng.integers(0, h, n)
        np.testing.assert_array_equal(locality_order(rows), locality_reference(rows))
        ordered = rows[locality_reference(rows)]
        np.testing.assert_array_equal(locality_order(ordered), np.arange(n))
        np.testing.assert_array_equal(lane_order(rows), locality_reference(rows, sign=1))


def test_a_warps_lanes_hold_the_finest_axis():
    fast, slow = np.meshgrid(np.arange(5), np.arange(40), indexing="ij")  # slow: 40 rows
    rows = np.column_stack([fast.ravel(), 5 + slow.ravel()])
    assert (rows[lane_order(rows)][:40, 0] == 0).all()  # one fast row, 40 slow rows
    assert (rows[locality_order(rows)][:5, 1] == 5).all()  # one slow row, 5 fast rows


def test_locality_order_ties_keep_slot_order():
    rows = np.array([[1, 0], [0, 1], [1, 1], [0, 0]])  # both slots have 2 distinct rows
    np.testing.assert_array_equal(locality_order(rows), locality_reference(rows))
