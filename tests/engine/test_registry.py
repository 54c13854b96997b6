"""register(): a name is taken once; the same strategy registered again is harmless."""

import importlib.util
import sys

import pytest

from barsweep.engine import Param, Strategy, get_strategy, register
from barsweep.engine import strategies as registry
from barsweep.errors import SpecError

# A strategy module, imported under two names below.
MODULE = '''
from numba import njit

from barsweep.engine import Param, Strategy, register


@njit
def signal(ind, rows, fparams, bars, t):
    return t == 0, False, False, False


STRATEGY = Strategy(name="_twice_imported", params=(Param("n"),), indicators=(),
                    signal=signal, kernel=signal, scan=signal)  # nothing to compile here
register(STRATEGY)
'''


@pytest.fixture(autouse=True)
def restored_registry():
    """Whatever a test registers is gone after it."""
    saved = dict(registry._REGISTRY), dict(registry._ORIGINS)
    yield
    for table, before in zip((registry._REGISTRY, registry._ORIGINS), saved):
        table.clear()
        table.update(before)


def plain(name: str, low: float = 1) -> Strategy:
    return Strategy(name=name, params=(Param("n", "int", low),), indicators=())


def test_a_taken_name_is_refused_naming_where_the_first_came_from():
    first = register(plain("_dup"))
    line = sys._getframe().f_lineno - 1
    with pytest.raises(SpecError) as refused:
        register(plain("_dup", low=2))
    message = str(refused.value)
    assert "'_dup'" in message and __name__ in message
    assert f"{__file__}:{line}" in message
    assert "replace=True" in message
    assert get_strategy("_dup") is first


def test_a_builtin_name_is_refused_naming_its_module():
    with pytest.raises(SpecError, match=r"'ema_cross' is already registered, by "
                                        r"barsweep\.engine\.strategies\.ema_cross"):
        register(plain("ema_cross"))
    assert get_strategy("ema_cross").signal is not None


def test_replace_true_replaces():
    register(plain("_dup"))
    second = plain("_dup", low=2)
    assert register(second, replace=True) is second
    assert get_strategy("_dup") is second


def test_the_same_strategy_again_is_harmless():
    first = register(plain("_dup"))
    assert register(first) is first
    assert register(plain("_dup")) is first  # an equal value, from another line
    assert register(get_strategy("rsi")) is get_strategy("rsi")


def test_a_module_imported_under_two_names_registers_once(tmp_path):
    path = tmp_path / "twice.py"
    path.write_text(MODULE)
    modules = []
    for name in ("twice", "package_alias.twice"):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    assert modules[0].signal is not modules[1].signal  # two signals, of the same source
    assert get_strategy("_twice_imported") is modules[0].STRATEGY


def test_two_definitions_from_one_line_are_refused():
    with pytest.raises(SpecError, match="'_dup' is already registered"):
        for low in (1, 2):
            register(plain("_dup", low))
